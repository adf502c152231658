program ring
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, nprocs, status(MPI_STATUS_SIZE)
  double precision :: x(16), y(16)
  x = 1d0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call waitlab_region_begin('work')
  call smpi_execute_benched(1d-3 * (rank + 1))
  call waitlab_region_end('work')
  if (rank == 0) then
    call MPI_Send(x, 16, MPI_DOUBLE_PRECISION, 1, 3, MPI_COMM_WORLD, ierr)
  else if (rank == 1) then
    call MPI_Recv(y, 16, MPI_DOUBLE_PRECISION, 0, 3, MPI_COMM_WORLD, status, ierr)
  end if
  call MPI_Allreduce(x, y, 16, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
end program ring
