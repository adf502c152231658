/* waitlab test program: MPI calls that wait or complete requests beyond the common ones (tests/test_programs_recording_more.py).
 *
 *   recording_more <mode>     (2 ranks; rank 0 is the late one: smpi_execute_benched(0.2) before it sends)
 *     sendrecv_replace   both ranks MPI_Sendrecv_replace 4 ints with each other
 *     probe              rank 1: MPI_Probe(ANY_SOURCE, ANY_TAG), then MPI_Recv of the message it found
 *     iprobe             rank 1: MPI_Iprobe(0, ANY_TAG) until it finds the message, then MPI_Recv
 *     probe_compute      rank 1: MPI_Probe, 0.05 s of computation, then MPI_Recv
 *     test               rank 1: MPI_Irecv, then MPI_Test until it completes
 *     testall            rank 1: MPI_Irecv, then MPI_Testall of it until it completes
 *     testany            rank 1: MPI_Irecv, MPI_Testany until it completes, then MPI_Waitall of the null request
 *     testsome           rank 1: two MPI_Irecv (tags 1, 2), MPI_Testsome until both completed
 *     get_status         rank 1: MPI_Irecv, MPI_Request_get_status until flag, then MPI_Wait
 *     test_compute       rank 1: MPI_Irecv, then {0.05 s of computation, MPI_Test} until it completes (rank 0
 *                        sends at 0.12 s)
 *     proc_null          rank 1: MPI_Irecv, MPI_Sendrecv from and to MPI_PROC_NULL, MPI_Barrier on
 *                        MPI_COMM_SELF, then MPI_Waitall of the receive
 *     reduce_scatter_block  MPI_Reduce_scatter_block of one int per rank
 *     alltoallw          MPI_Alltoallw: to peer p one element of type T_p (T_0 = MPI_INT, T_1 = MPI_DOUBLE)
 *     ireduce_scatter    MPI_Ireduce_scatter_block (rank 0 late by 0.2 s), then MPI_Ireduce_scatter with counts
 *                        {1, 2} (rank 1 late by 0.1 s), each completed by MPI_Wait
 *     ialltoallw         MPI_Ialltoallw (refused by the measurement layer)
 *     ssend_init         rank 0: MPI_Ssend_init, MPI_Start, MPI_Wait; rank 1 (late by 0.2 s here) MPI_Recv */
#include <mpi.h>
#include <smpi/smpi.h>
#include <stdio.h>
#include <string.h>

static void late(int rank, int who, double s)
{
  if (rank == who)
    smpi_execute_benched(s);
}

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* mode = argc > 1 ? argv[1] : "";
  int b[4] = {rank, rank, rank, rank}, c[4] = {0, 0, 0, 0};
  MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  MPI_Status st;
  int flag = 0, idx = 0, n = 0, done[2];

  if (strcmp(mode, "sendrecv_replace") == 0) {
    late(rank, 0, 0.2);
    MPI_Sendrecv_replace(b, 4, MPI_INT, 1 - rank, 0, 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else if (strcmp(mode, "probe") == 0 || strcmp(mode, "iprobe") == 0 || strcmp(mode, "probe_compute") == 0) {
    if (rank == 0) {
      late(rank, 0, 0.2);
      MPI_Send(b, 4, MPI_INT, 1, 7, MPI_COMM_WORLD);
    } else {
      if (strcmp(mode, "iprobe") == 0)
        while (!flag)
          MPI_Iprobe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
      else
        MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      if (strcmp(mode, "probe_compute") == 0)
        smpi_execute_benched(0.05);
      MPI_Recv(c, 4, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  } else if (strcmp(mode, "test") == 0 || strcmp(mode, "testall") == 0 || strcmp(mode, "testany") == 0 ||
             strcmp(mode, "get_status") == 0 || strcmp(mode, "test_compute") == 0) {
    if (rank == 0) {
      late(rank, 0, strcmp(mode, "test_compute") == 0 ? 0.12 : 0.2);
      MPI_Send(b, 4, MPI_INT, 1, 3, MPI_COMM_WORLD);
    } else {
      MPI_Irecv(c, 4, MPI_INT, 0, 3, MPI_COMM_WORLD, &r[0]);
      if (strcmp(mode, "test") == 0)
        while (!flag)
          MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
      else if (strcmp(mode, "testall") == 0)
        while (!flag)
          MPI_Testall(1, r, &flag, MPI_STATUSES_IGNORE);
      else if (strcmp(mode, "testany") == 0) {
        while (!flag)
          MPI_Testany(1, r, &idx, &flag, MPI_STATUS_IGNORE);
        MPI_Waitall(1, r, MPI_STATUSES_IGNORE); /* r[0] is MPI_REQUEST_NULL now: completes nothing */
      } else if (strcmp(mode, "get_status") == 0) {
        while (!flag)
          MPI_Request_get_status(r[0], &flag, MPI_STATUS_IGNORE);
        MPI_Wait(&r[0], MPI_STATUS_IGNORE);
      } else {
        while (!flag) {
          smpi_execute_benched(0.05);
          MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
        }
      }
    }
  } else if (strcmp(mode, "testsome") == 0) {
    if (rank == 0) {
      late(rank, 0, 0.2);
      MPI_Send(b, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
      MPI_Send(b, 1, MPI_INT, 1, 2, MPI_COMM_WORLD);
    } else {
      MPI_Irecv(&c[0], 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r[0]);
      MPI_Irecv(&c[1], 1, MPI_INT, 0, 2, MPI_COMM_WORLD, &r[1]);
      while (n < 2) {
        int out = 0;
        MPI_Testsome(2, r, &out, done, MPI_STATUSES_IGNORE);
        n += out;
      }
    }
  } else if (strcmp(mode, "proc_null") == 0) {
    if (rank == 0) {
      late(rank, 0, 0.2);
      MPI_Send(b, 4, MPI_INT, 1, 5, MPI_COMM_WORLD);
    } else {
      MPI_Irecv(c, 4, MPI_INT, 0, 5, MPI_COMM_WORLD, &r[0]);
      MPI_Sendrecv(b, 4, MPI_INT, MPI_PROC_NULL, 0, c, 4, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
    }
    MPI_Barrier(MPI_COMM_SELF);
    if (rank == 1)
      MPI_Waitall(1, r, MPI_STATUSES_IGNORE);
  } else if (strcmp(mode, "reduce_scatter_block") == 0) {
    late(rank, 0, 0.2);
    MPI_Reduce_scatter_block(b, c, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  } else if (strcmp(mode, "alltoallw") == 0 || strcmp(mode, "ialltoallw") == 0) {
    double sbuf[2] = {1.0, 2.0}, rbuf[2];
    int counts[2] = {1, 1}, displs[2] = {0, 8};
    MPI_Datatype stypes[2] = {MPI_INT, MPI_DOUBLE}, rtypes[2];
    rtypes[0] = rtypes[1] = rank == 0 ? MPI_INT : MPI_DOUBLE; /* what every peer sends to this rank */
    late(rank, 0, 0.2);
    if (strcmp(mode, "alltoallw") == 0)
      MPI_Alltoallw(sbuf, counts, displs, stypes, rbuf, counts, displs, rtypes, MPI_COMM_WORLD);
    else {
      MPI_Ialltoallw(sbuf, counts, displs, stypes, rbuf, counts, displs, rtypes, MPI_COMM_WORLD, &r[0]);
      MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    }
  } else if (strcmp(mode, "ireduce_scatter") == 0) {
    int counts[2] = {1, 2};
    late(rank, 0, 0.2);
    MPI_Ireduce_scatter_block(b, c, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[0]);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
    late(rank, 1, 0.1);
    MPI_Ireduce_scatter(b, c, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[0]);
    MPI_Wait(&r[0], MPI_STATUS_IGNORE);
  } else if (strcmp(mode, "ssend_init") == 0) {
    if (rank == 0) {
      MPI_Ssend_init(b, 4, MPI_INT, 1, 9, MPI_COMM_WORLD, &r[0]);
      MPI_Start(&r[0]);
      MPI_Wait(&r[0], MPI_STATUS_IGNORE);
      MPI_Request_free(&r[0]);
    } else {
      late(rank, 1, 0.2);
      MPI_Recv(c, 4, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  } else {
    fprintf(stderr, "unknown mode '%s'\n", mode);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return 0;
}
