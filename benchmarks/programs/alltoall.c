/* OSU-style alltoall latency loop (after osu_alltoall of the OSU Micro-Benchmarks): a barrier, then ITER
 * MPI_Alltoall calls of SIZE bytes per peer.  Usage: alltoall [bytes per peer, default 65536] [iterations, 10] */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int bytes = argc > 1 ? atoi(argv[1]) : 65536;
  int iter  = argc > 2 ? atoi(argv[2]) : 10;
  char* sbuf = calloc((size_t)bytes * (size_t)size, 1);
  char* rbuf = calloc((size_t)bytes * (size_t)size, 1);
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < iter; i++)
    MPI_Alltoall(sbuf, bytes, MPI_CHAR, rbuf, bytes, MPI_CHAR, MPI_COMM_WORLD);
  free(sbuf);
  free(rbuf);
  MPI_Finalize();
  return 0;
}
