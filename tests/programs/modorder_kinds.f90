! Used by modorder_work.f90 and modorder_main.f90 (tests/test_r24_fortran_programs.py): the late rank and its delay.
module modorder_kinds
  implicit none
  integer, parameter :: late_rank = 2
  double precision, parameter :: delay = 0.1d0
end module modorder_kinds
