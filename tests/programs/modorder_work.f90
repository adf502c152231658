! Uses modorder_kinds; used by modorder_main.f90 (tests/test_r24_fortran_programs.py).
module modorder_work
  use, intrinsic :: iso_c_binding, only: c_double
  use modorder_kinds, only: late_rank, delay
  implicit none
contains
  subroutine do_work(rank)
    integer, intent(in) :: rank
    if (rank == late_rank) call smpi_execute_benched(delay)
  end subroutine do_work
end module modorder_work
