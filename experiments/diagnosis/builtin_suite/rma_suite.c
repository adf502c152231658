/* waitlab built-in suite: one-sided (RMA) cases with known causes (docs/workbench.md).
 *
 *   rma_suite fence STEPS LATE SECONDS
 *       Every step: region "Compute" (1 ms balanced work; rank LATE also does SECONDS of injected work), an
 *       MPI_Put of 8 doubles to the right neighbour (rank + 1 mod P), MPI_Win_fence.  Every fence waits for
 *       the late rank: Wait at Fence (and Early Fence where the late rank's put lands).
 *   rma_suite lock STEPS LATE SECONDS
 *       Every step: region "Compute" (1 ms balanced work), then every rank but 0 locks rank 0's window
 *       exclusively, does region "Update" (0.2 ms balanced; rank LATE also SECONDS injected) holding the
 *       lock, accumulates 8 doubles into it and unlocks; then MPI_Barrier.  The locks serialise: ranks
 *       granted the lock after the late rank wait its injected work (Lock Contention).
 *
 * The injected work is WAITLAB_INJECT (the cause ledger), so counterfactual re-runs remove it.  One window of
 * 64 doubles on MPI_COMM_WORLD.  Deterministic: only smpi_execute_benched takes simulated time.
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "waitlab.h"

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* mode = argc > 1 ? argv[1] : "fence";
  int steps = argc > 2 ? atoi(argv[2]) : 4;
  int late = argc > 3 ? atoi(argv[3]) : 1;
  double extra = argc > 4 ? atof(argv[4]) : 0.004;
  double* base;
  double src[8] = {0};
  MPI_Win win;
  MPI_Win_allocate(64 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  int lock = strcmp(mode, "lock") == 0;
  if (!lock)
    MPI_Win_fence(0, win);
  for (int step = 0; step < steps; step++) {
    WAITLAB_STEP(step);
    WAITLAB_REGION_BEGIN("Compute");
    smpi_execute_benched(1e-3);
    WAITLAB_REGION_END("Compute");
    if (!lock)
      WAITLAB_INJECT("Compute", rank == late ? extra : 0.0); /* a second visit of "Compute", all injected */
    if (!lock) {
      MPI_Put(src, 8, MPI_DOUBLE, (rank + 1) % size, 8 * (step % 8), 8, MPI_DOUBLE, win);
      MPI_Win_fence(0, win);
    } else {
      if (rank != 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        WAITLAB_REGION_BEGIN("Update");
        smpi_execute_benched(2e-4);
        WAITLAB_REGION_END("Update");
        WAITLAB_INJECT("Update", rank == late ? extra : 0.0);
        MPI_Accumulate(src, 8, MPI_DOUBLE, 0, 0, 8, MPI_DOUBLE, MPI_SUM, win);
        MPI_Win_unlock(0, win);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  WAITLAB_STEP(-1);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}
