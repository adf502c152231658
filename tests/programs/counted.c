/* counted.c: computation without annotations, for computation = "counted" (waitlab's tests).
 *   counted [n]   rank r adds up n x (r + 1) numbers (no smpi_execute: the loop is the program's own work), meets
 *                 the others at a barrier, then waits on MPI_Wtime for 1 ms to pass (as OSU's compute loops do). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  long n = (argc > 1 ? atol(argv[1]) : 100000L) * (rank + 1);
  volatile double sum = 0.0;
  for (long i = 0; i < n; i++)
    sum += 0.5 * (double)i;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  while (MPI_Wtime() - t0 < 1e-3) {
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    printf("counted: sum %g\n", (double)sum);
  MPI_Finalize();
  return 0;
}
