! Fortran modules listed after the file that uses them (tests/test_r24_fortran_programs.py), 3 ranks: sources =
! [modorder_main.f90, modorder_work.f90, modorder_kinds.f90]; rank 2 computes 0.1 s before an MPI_Allreduce, so
! ranks 0 and 1 wait 0.1 s each in it.
program modorder_main
  use mpi
  use modorder_work
  use modorder_kinds, only: late_rank
  implicit none
  integer :: ierr, rank, x, y
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call do_work(rank)
  x = rank
  call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == late_rank) print *, 'sum', y
  call MPI_Finalize(ierr)
end program modorder_main
