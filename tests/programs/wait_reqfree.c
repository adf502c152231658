/* tests/test_wait_matching.py: a tester's reproducer (t37_reqfree.c, problem 1 of the s23 report). */
/* 2 ranks, tag 6.  rank 0: Isend 8 B to 1 + MPI_Request_free (fire and forget).  rank 1 receives it at once.
   then rank 0: Isend 512 KiB to 1 + Wait; rank 1 computes 0.2 first, then Recv -> Late Receiver 0.2 at rank 0 (its Wait). */
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int N = 65536; double* big = calloc(N, sizeof(double)); double x = 1;
  MPI_Request q;
  if (rank == 0) {
    MPI_Isend(&x, 1, MPI_DOUBLE, 1, 6, MPI_COMM_WORLD, &q); MPI_Request_free(&q);
    MPI_Isend(big, N, MPI_DOUBLE, 1, 6, MPI_COMM_WORLD, &q); MPI_Wait(&q, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(&x, 1, MPI_DOUBLE, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    smpi_execute_benched(0.2);
    MPI_Recv(big, N, MPI_DOUBLE, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  free(big);
  MPI_Finalize();
  return 0;
}
