! mpi_ibarrier + mpi_wait under a linear imbalance (the Fortran twin of ibarrier_imbalance.c): rank r computes
! 0.5 r s, then enters the nonblocking barrier; everyone leaves when the last rank (3) enters at 1.5 s.
program ibarrier_imbalance
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, req, status(MPI_STATUS_SIZE)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call smpi_execute_benched(0.5d0 * rank)
  call MPI_Ibarrier(MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, status, ierr)
  call MPI_Finalize(ierr)
end program ibarrier_imbalance
