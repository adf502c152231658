/* waitlab test program: one MPI feature per mode (argv[1]), with delays known by hand.
 *
 * Every delay is smpi_execute_benched(s): exactly s seconds of simulated compute.
 *   gatherv     4 ranks: compute 0.5, 4, 1, 2 s, then MPI_Gatherv of (r+1)*2 ints rooted at rank 2
 *   scatterv    4 ranks: compute 1, 0.5, 3, 2 s, then MPI_Scatterv of (r+1)*2 ints rooted at rank 2
 *   ssend       2 ranks: rank 0 MPI_Ssend of 4 bytes at once; rank 1 computes 0.2 s before MPI_Recv
 *   split       4 ranks as a 2x2 grid, row communicators by MPI_Comm_split(color = rank / 2, key = -rank):
 *               compute 0.1, 0.3, 0.2, 0.5 s then MPI_Barrier(row); compute 0.4, 0, 0, 0.1 s then
 *               MPI_Allreduce(row); then MPI_Comm_dup(row) and an MPI_Barrier on the duplicate
 *   ialltoall   4 ranks: rank 3 computes 0.3 s, then every rank MPI_Ialltoall + MPI_Wait
 *   persistent  2 ranks: MPI_Send_init / MPI_Recv_init; rank 0 computes 0.25 s before MPI_Start + MPI_Wait
 *   mixed       4 ranks on a ring (LULESH's pattern): MPI_Irecv from both neighbours, compute 0.01*(r+1) s,
 *               MPI_Isend to both, MPI_Waitall on the sends, then MPI_Wait on each receive; twice
 *   spin        2 ranks: rank 1 spins on the CPU (no smpi_execute) before MPI_Barrier: computation = "measured"
 *               must book that time as compute, not inside the barrier
 *   wtime       2 ranks: rank 0 waits for one second to pass on MPI_Wtime (OSU's nonblocking benchmarks do)
 *   waitsome    2 ranks: rank 1 posts receives of tags 1 and 2 and completes them with MPI_Waitsome; rank 0 sends
 *               tag 1 after 0.1 s and tag 2 after 0.3 s
 *   io          2 ranks: read the first line of in.txt (an input file), print it and write it to out<rank>.txt
 *   inject      4 ranks: WAITLAB_INJECT("solve", 0.1 * (r == 2)) + WAITLAB_INJECT("io", 0.05 * (r == 1)) before
 *               MPI_Barrier; then 0.2 s injected on ranks 1 and 3 (an exact tie) before MPI_Allreduce
 */
#include "waitlab.h"
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static void compute(double s)
{
  if (s > 0)
    smpi_execute_benched(s);
}

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 1 ? argv[1] : "";
  int buf[64] = {0}, out[64] = {0};
  int counts[4] = {2, 4, 6, 8}, displs[4] = {0, 2, 6, 12};
  if (strcmp(mode, "gatherv") == 0) {
    const double c[4] = {0.5, 4.0, 1.0, 2.0};
    compute(c[rank]);
    MPI_Gatherv(buf, counts[rank], MPI_INT, out, counts, displs, MPI_INT, 2, MPI_COMM_WORLD);
  } else if (strcmp(mode, "scatterv") == 0) {
    const double c[4] = {1.0, 0.5, 3.0, 2.0};
    compute(c[rank]);
    MPI_Scatterv(buf, counts, displs, MPI_INT, out, counts[rank], MPI_INT, 2, MPI_COMM_WORLD);
  } else if (strcmp(mode, "ssend") == 0) {
    if (rank == 0) {
      MPI_Ssend(buf, 1, MPI_INT, 1, 5, MPI_COMM_WORLD);
    } else if (rank == 1) {
      compute(0.2);
      MPI_Recv(out, 1, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  } else if (strcmp(mode, "split") == 0) {
    MPI_Comm row, dup;
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, -rank, &row);
    const double a[4] = {0.1, 0.3, 0.2, 0.5}, b[4] = {0.4, 0.0, 0.0, 0.1};
    compute(a[rank]);
    MPI_Barrier(row);
    compute(b[rank]);
    double x = rank, y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, row);
    MPI_Comm_dup(row, &dup);
    MPI_Barrier(dup);
    MPI_Comm_free(&dup);
    MPI_Comm_free(&row);
  } else if (strcmp(mode, "ialltoall") == 0) {
    MPI_Request req;
    compute(rank == 3 ? 0.3 : 0.0);
    MPI_Ialltoall(buf, 2, MPI_INT, out, 2, MPI_INT, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  } else if (strcmp(mode, "persistent") == 0) {
    MPI_Request req;
    if (rank == 0)
      MPI_Send_init(buf, 4, MPI_INT, 1, 9, MPI_COMM_WORLD, &req);
    else
      MPI_Recv_init(out, 4, MPI_INT, 0, 9, MPI_COMM_WORLD, &req);
    for (int it = 0; it < 2; it++) {
      if (rank == 0)
        compute(0.25);
      MPI_Start(&req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    MPI_Request_free(&req);
  } else if (strcmp(mode, "mixed") == 0) {
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    for (int it = 0; it < 2; it++) {
      MPI_Request rr[2], sr[2];
      MPI_Irecv(out, 8, MPI_INT, left, 1, MPI_COMM_WORLD, &rr[0]);
      MPI_Irecv(out + 8, 8, MPI_INT, right, 2, MPI_COMM_WORLD, &rr[1]);
      compute(0.01 * (rank + 1));
      MPI_Isend(buf, 8, MPI_INT, right, 1, MPI_COMM_WORLD, &sr[0]);
      MPI_Isend(buf + 8, 8, MPI_INT, left, 2, MPI_COMM_WORLD, &sr[1]);
      MPI_Waitall(2, sr, MPI_STATUSES_IGNORE);
      MPI_Wait(&rr[0], MPI_STATUS_IGNORE);
      MPI_Wait(&rr[1], MPI_STATUS_IGNORE);
    }
  } else if (strcmp(mode, "spin") == 0) {
    volatile double acc = 0;
    if (rank == 1)
      for (long i = 0; i < 40000000L; i++)
        acc += (double)i * 1e-9;
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (strcmp(mode, "wtime") == 0) {
    double t0 = MPI_Wtime();
    if (rank == 0)
      while (MPI_Wtime() - t0 < 1.0) {
      }
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (strcmp(mode, "waitsome") == 0) {
    if (rank == 0) {
      compute(0.1);
      MPI_Send(buf, 2, MPI_INT, 1, 1, MPI_COMM_WORLD);
      compute(0.2);
      MPI_Send(buf, 2, MPI_INT, 1, 2, MPI_COMM_WORLD);
    } else if (rank == 1) {
      MPI_Request rr[2];
      int done = 0, n, idx[2];
      MPI_Irecv(out, 2, MPI_INT, 0, 1, MPI_COMM_WORLD, &rr[0]);
      MPI_Irecv(out + 2, 2, MPI_INT, 0, 2, MPI_COMM_WORLD, &rr[1]);
      while (done < 2) {
        MPI_Waitsome(2, rr, &n, idx, MPI_STATUSES_IGNORE);
        done += n;
      }
    }
  } else if (strcmp(mode, "io") == 0) {
    char line[128] = "";
    FILE* in = fopen("in.txt", "r");
    if (in == NULL || fgets(line, sizeof line, in) == NULL)
      MPI_Abort(MPI_COMM_WORLD, 3);
    fclose(in);
    line[strcspn(line, "\n")] = '\0';
    printf("rank %d read '%s'\n", rank, line);
    fprintf(stderr, "rank %d on stderr\n", rank);
    char name[32];
    snprintf(name, sizeof name, "out%d.txt", rank);
    FILE* out_file = fopen(name, "w");
    fprintf(out_file, "%s from %d\n", line, rank);
    fclose(out_file);
    MPI_Barrier(MPI_COMM_WORLD);
  } else if (strcmp(mode, "inject") == 0) {
    WAITLAB_INJECT("solve", rank == 2 ? 0.1 : 0.0);
    WAITLAB_INJECT("io", rank == 1 ? 0.05 : 0.0);
    MPI_Barrier(MPI_COMM_WORLD);
    WAITLAB_INJECT("solve", rank % 2 == 1 ? 0.2 : 0.0);
    double x = rank, y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  } else {
    if (rank == 0)
      fprintf(stderr, "unknown mode '%s'\n", mode);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return 0;
}
