/* nbc_waitall.c: nonblocking collectives completed by one MPI_Waitall or MPI_Testall (tester t1 of session 26).
 * 4 ranks; rank r computes smpi_execute_benched(0.1 * r) (exactly 0.1 r simulated seconds) first.
 *
 *   nbc_waitall <mode>
 *     two      MPI_Iallreduce and MPI_Ibarrier on MPI_COMM_WORLD, then MPI_Waitall of both: rank r is blocked in
 *              the Waitall from 0.1 r to 0.3 s (rank 3's arrival), 0.3 + 0.2 + 0.1 = 0.6 s in all
 *     mixed    rank 0 MPI_Irecv from rank 3, rank 3 MPI_Isend to rank 0 (the others a null request), then
 *              MPI_Iallreduce, then MPI_Waitall of the allreduce and the message: rank 0 waits 0.3 s for rank 3's
 *              message, ranks 1 and 2 0.2 and 0.1 s for rank 3 in the allreduce
 *     halo     each rank posts MPI_Isend/MPI_Irecv to and from its ring neighbours at 0 s, computes, posts
 *              MPI_Iallreduce and completes the three in one MPI_Waitall: the messages came at once, the rank waits for
 *              the reduction, 0.3 + 0.2 + 0.1 = 0.6 s at NxN (tester t8 of session 26: it was lost)
 *     late     no compute before: MPI_Ibarrier at 0 s on every rank, rank 0 computes 0.3 s, then MPI_Waitall of the
 *              one request: every rank posted at 0 s, so no rank waits (the barrier completed at once)
 *     late_testall  as late, completed by an MPI_Testall loop (of one request)
 *     recv_testall  rank 0 MPI_Irecv from ranks 1, 2 and 3, which MPI_Send after their compute, completed by an
 *              MPI_Testall loop: SMPI 3.32's MPI_Testall completes and nulls the requests that are done even when it
 *              returns flag = 0 (the standard says it modifies none), so the call at 0.1 s completes the first
 *              message, the one at 0.2 s the second, the one at 0.3 s the third and returns flag = 1 */
#include <mpi.h>
#include <smpi/smpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* mode = argc > 1 ? argv[1] : "two";
  MPI_Request rq[2];
  double x = rank, y = 0.0;
  int b = 0;
  if (strcmp(mode, "recv_testall") == 0) {
    int got[3] = {0, 0, 0};
    MPI_Request rr[3];
    if (rank == 0) {
      for (int i = 0; i < 3; i++)
        MPI_Irecv(&got[i], 1, MPI_INT, i + 1, 7, MPI_COMM_WORLD, &rr[i]);
      int flag = 0;
      while (!flag)
        MPI_Testall(3, rr, &flag, MPI_STATUSES_IGNORE);
    } else {
      smpi_execute_benched(0.1 * rank);
      MPI_Send(&rank, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
    }
  } else if (strcmp(mode, "halo") == 0) {
    int size, out = rank, in = -1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Request hr[3];
    MPI_Isend(&out, 1, MPI_INT, (rank + 1) % size, 9, MPI_COMM_WORLD, &hr[0]);
    MPI_Irecv(&in, 1, MPI_INT, (rank + size - 1) % size, 9, MPI_COMM_WORLD, &hr[1]);
    if (rank > 0)
      smpi_execute_benched(0.1 * rank);
    MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &hr[2]);
    MPI_Waitall(3, hr, MPI_STATUSES_IGNORE);
  } else if (strncmp(mode, "late", 4) == 0) {
    MPI_Ibarrier(MPI_COMM_WORLD, &rq[0]);
    if (rank == 0)
      smpi_execute_benched(0.3);
    if (strcmp(mode, "late_testall") == 0) {
      int flag = 0;
      while (!flag)
        MPI_Testall(1, rq, &flag, MPI_STATUSES_IGNORE);
    } else {
      MPI_Waitall(1, rq, MPI_STATUSES_IGNORE);
    }
  } else {
    if (rank > 0)
      smpi_execute_benched(0.1 * rank);
    if (strcmp(mode, "mixed") == 0) {
      if (rank == 0)
        MPI_Irecv(&b, 1, MPI_INT, 3, 5, MPI_COMM_WORLD, &rq[1]);
      else if (rank == 3)
        MPI_Isend(&b, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, &rq[1]);
      else
        rq[1] = MPI_REQUEST_NULL;
      MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq[0]);
    } else {
      MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &rq[0]);
      MPI_Ibarrier(MPI_COMM_WORLD, &rq[1]);
    }
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
  }
  if (rank == 0)
    printf("nbc_waitall %s: done\n", mode);
  MPI_Finalize();
  return 0;
}
