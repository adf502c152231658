/* waitlab test program: rank 0 computes X seconds (smpi_execute_benched) before sending to rank 1,
 * so rank 1 waits X in a late-sender wait.  X is argv[1] (default 0.25). */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double x = argc > 1 ? atof(argv[1]) : 0.25;
  double buf[4] = {0, 1, 2, 3};
  if (rank == 0) {
    smpi_execute_benched(x);
    MPI_Send(buf, 4, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD);
  } else if (rank == 1) {
    MPI_Recv(buf, 4, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
