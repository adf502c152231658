/* waitlab test program: a deadlock waitlab must name call by call (issue 22).  Rank r < n - 1 receives from rank
 * r + 1 with tag r; the last rank waits in MPI_Barrier, which the others never reach. */
#include <mpi.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank, size, x = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank < size - 1)
    MPI_Recv(&x, 1, MPI_INT, rank + 1, rank, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  else
    MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
