! waitlab test program (Fortran, mpif.h): the Fortran bindings of recording_more.c's calls
! (tests/test_programs_recording_more.py).  2 ranks; rank 0 computes 0.2 s before it sends.
!   sendrecv_replace  both ranks MPI_Sendrecv_replace 4 integers with each other
!   probe             rank 1: MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG), then MPI_Recv of what it found
!   iprobe            rank 1: MPI_Iprobe until it finds the message, then MPI_Recv
!   test              rank 1: MPI_Irecv, then MPI_Test until it completes
!   testany           rank 1: MPI_Irecv, then MPI_Testany until it completes
!   testsome          rank 1: MPI_Irecv, then MPI_Testsome until it completes
!   reduce_scatter_block  MPI_Reduce_scatter_block of one integer per rank
!   gatherv           MPI_Gatherv to rank 1 of rank+1 integers
!   ireduce_scatter_block  MPI_Ireduce_scatter_block of one integer per rank, then MPI_Wait
!   igatherv          MPI_Igatherv (refused by the measurement layer)
program recording_more
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, other, status(MPI_STATUS_SIZE), req(1), idx, outcount, indices(1)
  integer :: b(4), c(4), counts(2), displs(2)
  logical :: flag
  character(len=32) :: mode
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_command_argument(1, mode)
  other = 1 - rank
  b = rank
  c = 0
  flag = .false.
  if (rank == 0) call smpi_execute_benched(0.2d0)
  select case (trim(mode))
  case ('sendrecv_replace')
    call MPI_Sendrecv_replace(b, 4, MPI_INTEGER, other, 0, other, 0, MPI_COMM_WORLD, status, ierr)
  case ('reduce_scatter_block')
    call MPI_Reduce_scatter_block(b, c, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  case ('gatherv')
    counts = (/ 1, 2 /)
    displs = (/ 0, 1 /)
    call MPI_Gatherv(b, rank + 1, MPI_INTEGER, c, counts, displs, MPI_INTEGER, 1, MPI_COMM_WORLD, ierr)
  case ('ireduce_scatter_block')
    call MPI_Ireduce_scatter_block(b, c, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req(1), ierr)
    call MPI_Wait(req(1), status, ierr)
  case ('igatherv')
    counts = (/ 1, 2 /)
    displs = (/ 0, 1 /)
    call MPI_Igatherv(b, rank + 1, MPI_INTEGER, c, counts, displs, MPI_INTEGER, 1, MPI_COMM_WORLD, req(1), ierr)
    call MPI_Wait(req(1), status, ierr)
  case default
    if (rank == 0) then
      call MPI_Send(b, 4, MPI_INTEGER, 1, 7, MPI_COMM_WORLD, ierr)
    else if (trim(mode) == 'probe' .or. trim(mode) == 'iprobe') then
      if (trim(mode) == 'probe') then
        call MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
      else
        do while (.not. flag)
          call MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, flag, status, ierr)
        end do
      end if
      call MPI_Recv(c, 4, MPI_INTEGER, status(MPI_SOURCE), status(MPI_TAG), MPI_COMM_WORLD, status, ierr)
    else
      call MPI_Irecv(c, 4, MPI_INTEGER, 0, 7, MPI_COMM_WORLD, req(1), ierr)
      do while (.not. flag)
        if (trim(mode) == 'test') then
          call MPI_Test(req(1), flag, status, ierr)
        else if (trim(mode) == 'testany') then
          call MPI_Testany(1, req, idx, flag, status, ierr)
        else
          call MPI_Testsome(1, req, outcount, indices, MPI_STATUSES_IGNORE, ierr)
          flag = outcount > 0
        end if
      end do
    end if
  end select
  call MPI_Finalize(ierr)
end program recording_more
