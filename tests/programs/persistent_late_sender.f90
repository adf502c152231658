! Persistent requests in Fortran (tests/test_r24_fortran_programs.py), 2 ranks.
! Phase 1: MPI_Recv_init / MPI_Send_init, then 3 x (MPI_Start + MPI_Wait); rank 1 computes 0.1 s before each
! MPI_Start, so rank 0 waits 0.1 s in each MPI_Wait (late sender).
! Phase 2: two of each, MPI_Startall + MPI_Waitall; rank 1 computes 0.2 s before MPI_Startall: rank 0 waits 0.2 s.
! Phase 3: rank 1 frees a pending MPI_Isend (MPI_Request_free); rank 0 receives it.
program persistent_late_sender
  use mpi
  implicit none
  integer :: ierr, rank, req, it, reqs(2), freed
  double precision :: x, a(2)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  if (rank == 0) then
    call MPI_Recv_init(x, 1, MPI_DOUBLE_PRECISION, 1, 4, MPI_COMM_WORLD, req, ierr)
    call MPI_Recv_init(a(1), 1, MPI_DOUBLE_PRECISION, 1, 5, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Recv_init(a(2), 1, MPI_DOUBLE_PRECISION, 1, 6, MPI_COMM_WORLD, reqs(2), ierr)
  else
    call MPI_Send_init(x, 1, MPI_DOUBLE_PRECISION, 0, 4, MPI_COMM_WORLD, req, ierr)
    call MPI_Send_init(a(1), 1, MPI_DOUBLE_PRECISION, 0, 5, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Ssend_init(a(2), 1, MPI_DOUBLE_PRECISION, 0, 6, MPI_COMM_WORLD, reqs(2), ierr)
  end if
  do it = 1, 3
    if (rank == 1) then
      call smpi_execute_benched(0.1d0)
      x = it
    end if
    call MPI_Start(req, ierr)
    call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  end do
  if (rank == 1) then
    call smpi_execute_benched(0.2d0)
    a = (/ 4d0, 5d0 /)
  end if
  call MPI_Startall(2, reqs, ierr)
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  if (rank == 0) print '(a,4f4.0)', 'got', x, a
  call MPI_Request_free(req, ierr)
  call MPI_Request_free(reqs(1), ierr)
  call MPI_Request_free(reqs(2), ierr)
  if (rank == 1) then
    call MPI_Isend(x, 1, MPI_DOUBLE_PRECISION, 0, 7, MPI_COMM_WORLD, freed, ierr)
    call MPI_Request_free(freed, ierr)
  else
    call MPI_Recv(x, 1, MPI_DOUBLE_PRECISION, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  end if
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
end program
