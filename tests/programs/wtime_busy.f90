! A Fortran busy loop on MPI_Wtime (tests/test_r24_fortran_programs.py), 2 ranks: rank 1 spins until 0.1 s have
! passed, then both call MPI_Bcast with root 1.  computation = "none": refused (time never passes);
! computation = "counted": rank 1 reaches the Bcast 0.1 s late (late broadcast 0.1 s on rank 0).
program wtime_busy
  use mpi
  implicit none
  integer :: ierr, rank
  double precision :: t0, x, s
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  s = 0
  if (rank == 1) then
    t0 = MPI_Wtime()
    do while (MPI_Wtime() - t0 < 0.1d0)
      s = s + 1
    end do
  end if
  x = rank
  call MPI_Bcast(x, 1, MPI_DOUBLE_PRECISION, 1, MPI_COMM_WORLD, ierr)
  if (rank == 0) print *, 'x', x
  call MPI_Finalize(ierr)
end program
