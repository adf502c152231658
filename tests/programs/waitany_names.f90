! tests/test_r24_call_names.py: the Fortran twin of waitany_names.c (MPI_Waitany and MPI_Waitsome keep their names).
! 2 ranks.  Rank 0 posts receives of tags 1, 2 and 3 from rank 1 at 0 s and completes them with MPI_Waitany,
! MPI_Waitany again and MPI_Waitsome; rank 1 computes 0.1 s before each of its three sends.  By hand: late sender
! 0.1 s in each call (the later two: 0.1 s less the previous message's transfer, under a microsecond).
program waitany_names
  use mpi
  implicit none
  integer :: ierr, rank, i, idx, n, reqs(3), indices(3)
  double precision :: x(3)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  x = (/ 1d0, 2d0, 3d0 /)
  if (rank == 0) then
    do i = 1, 3
      call MPI_Irecv(x(i), 1, MPI_DOUBLE_PRECISION, 1, i, MPI_COMM_WORLD, reqs(i), ierr)
    end do
    call MPI_Waitany(3, reqs, idx, MPI_STATUS_IGNORE, ierr)
    call MPI_Waitany(3, reqs, idx, MPI_STATUS_IGNORE, ierr)
    call MPI_Waitsome(3, reqs, n, indices, MPI_STATUSES_IGNORE, ierr)
  else if (rank == 1) then
    do i = 1, 3
      call smpi_execute_benched(0.1d0)
      call MPI_Send(x(i), 1, MPI_DOUBLE_PRECISION, 0, i, MPI_COMM_WORLD, ierr)
    end do
  end if
  call MPI_Finalize(ierr)
end program
