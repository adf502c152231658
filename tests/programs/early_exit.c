/* early_exit.c: a rank that leaves before the others are done (tester t1 of session 26, findings 2 and 3).
 *
 *   early_exit <mode>
 *     exit0    rank 1 calls exit(0) before MPI_Barrier and MPI_Finalize: the other ranks wait in the barrier for it
 *     return0  rank 1 returns 0 from main there (no MPI_Finalize)
 *     neg      every rank returns -1 after MPI_Finalize (the operating system's status 255) */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "neg") == 0) {
    MPI_Finalize();
    return -1;
  }
  if (rank == 1 && strcmp(mode, "exit0") == 0)
    exit(0);
  if (rank == 1 && strcmp(mode, "return0") == 0)
    return 0;
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
