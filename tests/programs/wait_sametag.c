/* tests/test_wait_matching.py: a tester's reproducer (t29_sametag.c, problem 1 of the s23 report). */
/* 2 ranks. phase 1: rank 1 late 0.1; each rank Irecv+Isend with the other, Waitall(2).  -> rank 0 LS 0.1
   phase 2: Irecv+Isend, then Wait(recv), Wait(send).  rank 0 late 0.2 -> rank 1 LS 0.2 (in its first Wait) */
#include <mpi.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int other = 1 - rank;
  double s[8] = {0}, r[8];
  MPI_Request q[2];
  if (rank == 1) smpi_execute_benched(0.1);
  MPI_Irecv(r, 8, MPI_DOUBLE, other, 0, MPI_COMM_WORLD, &q[0]);
  MPI_Isend(s, 8, MPI_DOUBLE, other, 0, MPI_COMM_WORLD, &q[1]);
  MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
  if (rank == 0) smpi_execute_benched(0.2);
  MPI_Irecv(r, 8, MPI_DOUBLE, other, 0, MPI_COMM_WORLD, &q[0]);
  MPI_Isend(s, 8, MPI_DOUBLE, other, 0, MPI_COMM_WORLD, &q[1]);
  MPI_Wait(&q[0], MPI_STATUS_IGNORE);
  MPI_Wait(&q[1], MPI_STATUS_IGNORE);
  MPI_Finalize();
  return 0;
}
