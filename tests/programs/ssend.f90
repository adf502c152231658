! waitlab test program (Fortran, mpif.h): rank 0 MPI_Ssend of one 4-byte integer at once; rank 1 computes
! 0.2 s before MPI_Recv (late receiver: 0.2 s on rank 0).  Then rank 1 computes 0.1 s and both call
! MPI_Sendrecv (rank 0 waits 0.1 s for rank 1's message: late sender inside its sendrecv).
program ssend
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, other, status(MPI_STATUS_SIZE)
  integer :: x, y
  x = 42
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  other = 1 - rank
  if (rank == 0) then
    call MPI_Ssend(x, 1, MPI_INTEGER, 1, 5, MPI_COMM_WORLD, ierr)
  else if (rank == 1) then
    call smpi_execute_benched(0.2d0)
    call MPI_Recv(y, 1, MPI_INTEGER, 0, 5, MPI_COMM_WORLD, status, ierr)
    call smpi_execute_benched(0.1d0)
  end if
  call MPI_Sendrecv(x, 1, MPI_INTEGER, other, 6, y, 1, MPI_INTEGER, other, 6, MPI_COMM_WORLD, status, ierr)
  call MPI_Finalize(ierr)
end program ssend
