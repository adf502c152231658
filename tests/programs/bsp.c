/* waitlab test program: a small BSP code with annotated regions, an imbalanced solve, a ring halo
 * exchange, an allreduce per step, then an unannotated tail (bcast, wildcard receives). */
#include <mpi.h>
#include <stdlib.h>
#include "waitlab.h"

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int steps = argc > 1 ? atoi(argv[1]) : 3;
  double sbuf[4096] = {0}, rbuf[4096];
  for (int s = 0; s < steps; s++) {
    WAITLAB_STEP(s);
    WAITLAB_REGION_BEGIN("step");
    WAITLAB_REGION_BEGIN("solve");
    smpi_execute_benched(1e-3 * (1 + rank) * (1 + s % 2));
    WAITLAB_REGION_END("solve");
    WAITLAB_REGION_BEGIN("halo");
    MPI_Request req[2];
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Irecv(rbuf, 4096, MPI_DOUBLE, left, s, MPI_COMM_WORLD, &req[0]);
    MPI_Isend(sbuf, 4096, MPI_DOUBLE, right, s, MPI_COMM_WORLD, &req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    WAITLAB_REGION_END("halo");
    double x = rank, y;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    WAITLAB_REGION_END("step");
  }
  WAITLAB_STEP(-1);
  smpi_execute_benched(2e-4 * rank);
  MPI_Bcast(sbuf, 8, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int i = 1; i < size; i++)
      MPI_Recv(rbuf, 1, MPI_DOUBLE, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    smpi_execute_benched(1e-4 * rank);
    MPI_Send(sbuf, 1, MPI_DOUBLE, 0, 9, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
