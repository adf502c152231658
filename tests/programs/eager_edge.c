/* Blocking sends around the eager threshold: rank 1 posts each receive 0.1 s after rank 0 sends.  SMPI sends a
   message of fewer bytes than smpi/send-is-detached-thresh eagerly (rank 0 does not wait) and a larger or equal one
   by rendezvous (rank 0 waits 0.1 s for its receiver).  Sizes: 12272, 12287, 12288, 12289, 20000 bytes. */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int sizes[5] = {12272, 12287, 12288, 12289, 20000};
  char* buf = calloc(20000, 1);
  for (int i = 0; i < 5; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      MPI_Send(buf, sizes[i], MPI_CHAR, 1, i, MPI_COMM_WORLD);
    } else {
      smpi_execute_benched(0.1);
      MPI_Recv(buf, sizes[i], MPI_CHAR, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
