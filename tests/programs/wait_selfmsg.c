/* tests/test_wait_matching.py: a tester's reproducer (t20_selfmsg.c, problem 2 of the s23 report). */
/* 2 ranks: each rank Isend to itself, Recv from itself, Wait the send. Then rank 1 late 0.1 at a barrier -> WB 0.1 */
#include <mpi.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double s[4] = {0}, r[4];
  MPI_Request q;
  MPI_Isend(s, 4, MPI_DOUBLE, rank, 11, MPI_COMM_WORLD, &q);
  MPI_Recv(r, 4, MPI_DOUBLE, rank, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Wait(&q, MPI_STATUS_IGNORE);
  if (rank == 1) smpi_execute_benched(0.1);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
