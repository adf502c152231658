/* waitlab test program: fails on purpose in the way argv[1] names (abort, segv, deadlock, exit, loop). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* mode = argc > 1 ? argv[1] : "none";
  printf("rank %d starting (%s)\n", rank, mode);
  fflush(stdout);
  if (!strcmp(mode, "abort") && rank == 1)
    MPI_Abort(MPI_COMM_WORLD, 3);
  if (!strcmp(mode, "segv") && rank == 1) {
    volatile int* p = NULL;
    *p = 1;
  }
  if (!strcmp(mode, "deadlock")) {
    int x;
    MPI_Recv(&x, 1, MPI_INT, (rank + 1) % 2, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  if (!strcmp(mode, "exit") && rank == 0)
    exit(2);
  if (!strcmp(mode, "loop"))
    for (;;)
      MPI_Barrier(MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
