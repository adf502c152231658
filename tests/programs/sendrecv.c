/* waitlab test program: a ring of MPI_Sendrecv calls.  Rank 0 computes X seconds (WAITLAB_INJECT, ground truth)
 * in region "work" before it; its right neighbour (rank 1) waits for its message in MPI_Sendrecv, X is argv[1]
 * (default 0.2). */
#include <mpi.h>
#include <stdlib.h>
#include "waitlab.h"

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double x = argc > 1 ? atof(argv[1]) : 0.2;
  double out[4] = {0, 1, 2, 3}, in[4];
  WAITLAB_REGION_BEGIN("work");
  if (rank == 0)
    WAITLAB_INJECT("work", x);
  WAITLAB_REGION_END("work");
  MPI_Sendrecv(out, 4, MPI_DOUBLE, (rank + 1) % size, 3, in, 4, MPI_DOUBLE, (rank + size - 1) % size, 3,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Finalize();
  return 0;
}
