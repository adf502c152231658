// waitlab test program (C++): a token goes around the ring once; each rank works (rank+1) ms first.
#include <mpi.h>
#include <vector>
#include "waitlab.h"

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<double> token(8, 0.0);
  WAITLAB_REGION_BEGIN("work");
  smpi_execute_benched(1e-3 * (rank + 1));
  WAITLAB_REGION_END("work");
  if (rank == 0) {
    MPI_Send(token.data(), 8, MPI_DOUBLE, 1 % size, 0, MPI_COMM_WORLD);
    MPI_Recv(token.data(), 8, MPI_DOUBLE, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    MPI_Recv(token.data(), 8, MPI_DOUBLE, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(token.data(), 8, MPI_DOUBLE, (rank + 1) % size, 0, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
