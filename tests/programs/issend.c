/* Nonblocking synchronous sends (issue 13): small MPI_Issend messages that wait for a late receiver.
 *
 * Every delay is smpi_execute_benched(s): exactly s seconds of simulated compute.  2 ranks:
 *   1. rank 0 MPI_Issend of 4 bytes (tag 5) at t = 0 + MPI_Wait; rank 1 computes 0.2 s, then MPI_Recv:
 *      late receiver 0.2 s in rank 0's MPI_Wait.
 *   2. rank 0 MPI_Isend (tag 6) and MPI_Issend (tag 7) of 4 bytes each + MPI_Waitall; rank 1 computes 0.3 s more,
 *      then receives tag 6 and tag 7: the eager isend does not wait, the issend does, 0.3 s in the MPI_Waitall.
 */
#include <mpi.h>
#include <smpi/smpi.h>

static void compute(double s)
{
  if (s > 0)
    smpi_execute_benched(s);
}

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int buf[2] = {1, 2}, out[2] = {0, 0};
  MPI_Request req[2];
  if (rank == 0) {
    MPI_Issend(buf, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, &req[0]);
    MPI_Wait(&req[0], MPI_STATUS_IGNORE);
    MPI_Isend(buf, 1, MPI_INT, 1, 6, MPI_COMM_WORLD, &req[0]);
    MPI_Issend(buf + 1, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
  } else if (rank == 1) {
    compute(0.2);
    MPI_Recv(out, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    compute(0.3);
    MPI_Recv(out, 1, MPI_INT, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Recv(out + 1, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
