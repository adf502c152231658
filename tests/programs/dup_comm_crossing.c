/* waitlab test program: point-to-point messages of the same (source, destination, tag) on two communicators with the
 * same members, MPI_COMM_WORLD and a duplicate of it, received in the other order than they were sent.  MPI matches a
 * message on its own communicator only.  Rank 0 sends 8 bytes with tag 0 on the duplicate at 0.1 s, then 1 MiB with
 * tag 0 on MPI_COMM_WORLD at 0.9 s; rank 1 receives on MPI_COMM_WORLD from 0.2 s (a late sender: 0.7 s), then on the
 * duplicate (its message arrived long before: no wait).  Every delay is smpi_execute_benched: exact simulated time. */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  const int big = 1 << 20;
  char* buf = calloc((size_t)big, 1);
  double t0 = MPI_Wtime(); /* both ranks leave MPI_Comm_dup together */
  if (rank == 0) {
    smpi_execute_benched(0.1 - (MPI_Wtime() - t0));
    MPI_Send(buf, 8, MPI_BYTE, 1, 0, dup);
    smpi_execute_benched(0.9 - (MPI_Wtime() - t0));
    MPI_Send(buf, big, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
  } else if (rank == 1) {
    smpi_execute_benched(0.2);
    MPI_Recv(buf, big, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    smpi_execute_benched(0.01);
    MPI_Recv(buf, 8, MPI_BYTE, 0, 0, dup, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&dup);
  free(buf);
  MPI_Finalize();
  return 0;
}
