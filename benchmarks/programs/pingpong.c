/* waitlab benchmark program: two ranks exchange an 8-byte message N times (blocking send and receive), no
 * step markers and no regions: the densest stream of point-to-point records per second of SMPI stage, and the
 * shape of most real programs' records (no WAITLAB_STEP). Every receive of rank 1 is a late sender. */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  char buf[8] = {0};
  for (int i = 0; i < n; i++) {
    if (rank == 0) {
      MPI_Send(buf, 8, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buf, 8, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buf, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf, 8, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    }
  }
  MPI_Finalize();
  return 0;
}
