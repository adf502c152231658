! waitlab test program (Fortran bindings of one-sided MPI), 3 ranks, one window of 8 doubles:
! fence epoch: rank 1 computes 0.1 s then puts to rank 0, rank 2 computes 0.25 s: at the closing fence rank 0
! waits 0.25 s (Early Fence 0.1 s, Wait at Fence 0.15 s), rank 1 waits 0.15 s.
! lock epochs: rank 0 locks rank 2 exclusively for 0.2 s; rank 1 asks for it 0.05 s later: Lock Contention 0.15 s.
program rma_fence_lock
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, win
  integer(kind=MPI_ADDRESS_KIND) :: sz, disp
  double precision :: buf(8), src(8)
  src = 1d0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  sz = 64
  disp = 0
  call MPI_Win_create(buf, sz, 8, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  if (rank == 1) then
    call smpi_execute_benched(0.1d0)
    call MPI_Put(src, 8, MPI_DOUBLE_PRECISION, 0, disp, 8, MPI_DOUBLE_PRECISION, win, ierr)
  else if (rank == 2) then
    call smpi_execute_benched(0.25d0)
  end if
  call MPI_Win_fence(0, win, ierr)
  if (rank == 0) then
    call MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 2, 0, win, ierr)
    call smpi_execute_benched(0.2d0)
    call MPI_Put(src, 8, MPI_DOUBLE_PRECISION, 2, disp, 8, MPI_DOUBLE_PRECISION, win, ierr)
    call MPI_Win_unlock(2, win, ierr)
  else if (rank == 1) then
    call smpi_execute_benched(0.05d0)
    call MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 2, 0, win, ierr)
    call MPI_Get(src, 8, MPI_DOUBLE_PRECISION, 2, disp, 8, MPI_DOUBLE_PRECISION, win, ierr)
    call MPI_Win_unlock(2, win, ierr)
  end if
  call MPI_Win_free(win, ierr)
  call MPI_Finalize(ierr)
end program rma_fence_lock
