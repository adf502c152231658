/* Incast: every rank but 0 sends one message of SIZE bytes (default 4 MiB) to rank 0 at once; rank 0 posts every
 * receive, then waits for all.  With one rank per node the messages share rank 0's switch output port (the
 * platform's head-of-line law) and, on one node, its memory path.  Usage: incast [bytes] */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long bytes = argc > 1 ? atol(argv[1]) : 4L << 20;
  char* buf = calloc((size_t)bytes * (rank == 0 ? (size_t)size : 1u), 1);
  if (rank == 0) {
    MPI_Request* req = malloc(sizeof(MPI_Request) * (size_t)size);
    for (int r = 1; r < size; r++)
      MPI_Irecv(buf + (size_t)bytes * (size_t)r, (int)bytes, MPI_CHAR, r, 0, MPI_COMM_WORLD, &req[r - 1]);
    MPI_Waitall(size - 1, req, MPI_STATUSES_IGNORE);
    free(req);
  } else {
    MPI_Send(buf, (int)bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
