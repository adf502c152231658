/* tests/test_r24_call_names.py: MPI_Waitany and MPI_Waitsome keep their names (the event table's `call`); Fortran
 * twin: waitany_names.f90.
 * 2 ranks.  Rank 0 posts receives of tags 1, 2 and 3 from rank 1 at 0 s and completes them with MPI_Waitany,
 * MPI_Waitany again and MPI_Waitsome.  Rank 1 computes 0.1 s before each of its three sends (tags 1, 2, 3).
 * By hand: rank 0 waits 0.1 s in its first MPI_Waitany (late sender: entered at 0 s, the send at 0.1 s); each later
 * call enters when the previous message has arrived (just after its send) and waits until the next send, 0.1 s
 * later: 0.1 s less that message's transfer (under a microsecond).  Late sender 0.3 s in all. */
#include <mpi.h>
#include <smpi/smpi.h>
int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank, index, n, idx[3];
  double x[3] = {1.0, 2.0, 3.0};
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    MPI_Request q[3];
    for (int i = 0; i < 3; i++)
      MPI_Irecv(&x[i], 1, MPI_DOUBLE, 1, i + 1, MPI_COMM_WORLD, &q[i]);
    MPI_Waitany(3, q, &index, MPI_STATUS_IGNORE);
    MPI_Waitany(3, q, &index, MPI_STATUS_IGNORE);
    MPI_Waitsome(3, q, &n, idx, MPI_STATUSES_IGNORE);
  } else if (rank == 1) {
    for (int i = 0; i < 3; i++) {
      smpi_execute_benched(0.1);
      MPI_Send(&x[i], 1, MPI_DOUBLE, 0, i + 1, MPI_COMM_WORLD);
    }
  }
  MPI_Finalize();
  return 0;
}
