! waitlab test program (Fortran, mpif.h): the Fortran bindings of inplace_collectives.c's calls that every rank makes
! with MPI_IN_PLACE (tests/test_inplace_collectives.py), 4 ranks.
!   allgather  rank 2 computes 0.1 s, then MPI_Allgather(MPI_IN_PLACE, 0, MPI_DOUBLE_PRECISION, g, 3,
!              MPI_DOUBLE_PRECISION); rank 1 computes 0.1 s, then MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL,
!              g, (/1, 2, 3, 4/), (/0, 1, 3, 6/), MPI_DOUBLE_PRECISION)
!   others     no delays: MPI_Alltoall (2 integers), MPI_Alltoallv (rank i and j exchange 1 + i + j integers),
!              MPI_Iallgather (2 doubles) + MPI_Wait, each with MPI_IN_PLACE and the ignored count 0 (alltoallv:
!              the receive counts)
! The ignored datatype is MPI_DATATYPE_NULL but in MPI_Allgather and MPI_Iallgather: SMPI 3.32's own Fortran bindings
! of those two crash (SIGSEGV, without waitlab too) on MPI_IN_PLACE with MPI_DATATYPE_NULL.
! The rooted collectives (a root with MPI_IN_PLACE, the other ranks with a buffer) are left to the C program: gfortran
! (10 and later) refuses one file passing both MPI_IN_PLACE (mpif.h: external) and an array as the same argument of
! an MPI routine, unless compiled with -fallow-argument-mismatch.
program inplace_collectives
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, j, req, status(MPI_STATUS_SIZE)
  integer :: b(32), c(4), d(4), ac(4), ad(4)
  double precision :: g(16)
  character(len=32) :: mode
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_command_argument(1, mode)
  b = 0
  g = 0d0
  select case (trim(mode))
  case ('allgather')
    c = (/ 1, 2, 3, 4 /)
    d = (/ 0, 1, 3, 6 /)
    if (rank == 2) call smpi_execute_benched(0.1d0)
    call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DOUBLE_PRECISION, g, 3, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
    if (rank == 1) call smpi_execute_benched(0.1d0)
    call MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g, c, d, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
  case ('others')
    do j = 1, 4
      ac(j) = rank + j
    end do
    ad(1) = 0
    do j = 2, 4
      ad(j) = ad(j - 1) + ac(j - 1)
    end do
    call MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, 2, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    call MPI_Alltoallv(MPI_IN_PLACE, ac, ad, MPI_DATATYPE_NULL, b, ac, ad, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    call MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DOUBLE_PRECISION, g, 2, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, req, ierr)
    call MPI_Wait(req, status, ierr)
  end select
  call MPI_Finalize(ierr)
end program inplace_collectives
