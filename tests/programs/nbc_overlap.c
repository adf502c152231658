/* nbc_overlap.c: the structure of OSU's nonblocking-collective benchmarks (osu_ialltoall, ...), written for waitlab's
 * tests.  Each iteration posts a nonblocking collective, computes while it travels, then waits for it.
 *
 *   nbc_overlap <mode> [iterations] [bytes] [compute_s]
 *     exact   compute with smpi_execute_benched(compute_s) (any computation setting: deterministic)
 *     probe   as exact, in 4 slices with an MPI_Test after each (OSU's num_probes)
 *     wtime   OSU's dummy compute: spin on MPI_Wtime until compute_s have passed (computation = "measured" or
 *             a [simulation] config smpi/wtime cost; under computation = "none" MPI_Wtime never advances)
 *     mixed   Ialltoall, Iallreduce and Ibcast posted together, completed in reverse order
 * Rank r computes (1 + r / 4) times compute_s (an imbalance, so the completions wait differently per rank). */
#include <mpi.h>
#include <smpi/smpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void compute(const char* mode, double seconds, MPI_Request* req)
{
  if (strcmp(mode, "wtime") == 0) {
    double t0 = MPI_Wtime();
    while (MPI_Wtime() - t0 < seconds) {
    }
  } else if (strcmp(mode, "probe") == 0) {
    for (int i = 0; i < 4; i++) {
      int flag = 0;
      smpi_execute_benched(seconds / 4);
      MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    }
  } else {
    smpi_execute_benched(seconds);
  }
}

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 1 ? argv[1] : "exact";
  int iterations = argc > 2 ? atoi(argv[2]) : 5;
  int bytes = argc > 3 ? atoi(argv[3]) : 65536;
  double seconds = (argc > 4 ? atof(argv[4]) : 1e-3) * (1.0 + rank / 4.0);
  char* sbuf = calloc((size_t)bytes * size, 1);
  char* rbuf = calloc((size_t)bytes * size, 1);
  double x = rank, y = 0.0;
  for (int it = 0; it < iterations; it++) {
    MPI_Request req[3];
    MPI_Ialltoall(sbuf, bytes, MPI_CHAR, rbuf, bytes, MPI_CHAR, MPI_COMM_WORLD, &req[0]);
    if (strcmp(mode, "mixed") == 0) {
      MPI_Iallreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req[1]);
      MPI_Ibcast(sbuf, bytes, MPI_CHAR, 1, MPI_COMM_WORLD, &req[2]);
      compute("exact", seconds, req);
      MPI_Wait(&req[2], MPI_STATUS_IGNORE);
      MPI_Wait(&req[1], MPI_STATUS_IGNORE);
    } else {
      compute(mode, seconds, req);
    }
    MPI_Wait(&req[0], MPI_STATUS_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0)
    printf("nbc_overlap %s: %d iterations of %d bytes per peer done\n", mode, iterations, bytes);
  free(sbuf);
  free(rbuf);
  MPI_Finalize();
  return 0;
}
