/* waitlab test program: 4 ranks split into even and odd communicators; rank 2 computes 0.1 s and rank 3 0.3 s
 * (smpi_execute_benched) before an MPI_Allreduce on their communicator.  By hand: rank 0 waits 0.1 s, rank 1
 * 0.3 s (Wait at NxN 0.4 s).  SMPI's -trace-ti writes the allreduce without its communicator, so its trace replays
 * it on all four ranks (0.8 s). */
#include <mpi.h>
#include <smpi/smpi.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  double x = rank, y;
  if (rank == 2)
    smpi_execute_benched(0.1);
  if (rank == 3)
    smpi_execute_benched(0.3);
  MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, half);
  MPI_Comm_free(&half);
  MPI_Finalize();
  return 0;
}
