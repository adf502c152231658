/* waitlab test program: one-sided (RMA) wait states with known delays (smpi_execute_benched is exact).
 * argv[1] = pattern, argv[2] = A seconds, argv[3] = B seconds.  One window of 64 doubles on MPI_COMM_WORLD.
 *   late_post      (2 ranks) rank 1 computes A, then posts; rank 0 starts at once: its win_start waits A.
 *   early_wait     (2 ranks) rank 0: start, compute A, put, compute B, complete; rank 1: post, wait.
 *                  rank 1's win_wait waits A + B: Late Complete B (after the put), Early Wait A.
 *   fence          (3 ranks) fence; rank 1 computes A then puts to rank 0; rank 2 computes B (> A); fence.
 *                  rank 0 waits B at the closing fence: Early Fence A (the put), Wait at Fence B - A.
 *   lock           (3 ranks) rank 0 locks rank 2 exclusively, computes A, puts, unlocks; rank 1 computes B (< A),
 *                  then locks rank 2 exclusively: its win_lock waits A - B (Lock Contention).
 *   lock_shared    (3 ranks) as lock, but rank 1 takes a shared lock: it still waits A - B (rank 0 is exclusive);
 *                  rank 2 takes a shared lock after rank 1 (at 2 B) and waits too: A - 2 B.
 *   subcomm        (2 ranks) a fence on a window of a one-rank sub-communicator (waitlab refuses it).
 *   accumulate     (2 ranks) fence; rank 0 accumulates 8 doubles into rank 1 (MPI_SUM); fence.
 *   fetch          (2 ranks) fence; rank 0 fetches-and-adds one double of rank 1 (MPI_Fetch_and_op); fence.
 *   lock_all       (3 ranks) every rank: lock_all, compute (rank 1: A, the others: B < A), put 8 doubles to the next
 *                  rank, flush it, accumulate 8 doubles into the rank after, flush_all, unlock_all.  Passive
 *                  target: nobody waits for rank 1 until MPI_Win_free, where ranks 0 and 2 wait A - B.
 *   neighbours     (4 ranks) two iterations of: fence (the first with MPI_MODE_NOPRECEDE), compute (rank 2: A,
 *                  the others: B < A), put 8 doubles to each ring neighbour, fence.  Every rank but 2 waits
 *                  about A - B at each closing fence (ranks 1 and 3, targets of rank 2's puts, partly as Early Fence).
 */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* mode = argc > 1 ? argv[1] : "late_post";
  double a = argc > 2 ? atof(argv[2]) : 0.2;
  double b = argc > 3 ? atof(argv[3]) : 0.05;
  double* base;
  double src[64] = {0};
  MPI_Win win;
  MPI_Win_allocate(64 * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  MPI_Group world, peer;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int other = 1 - rank;
  if (strcmp(mode, "late_post") == 0 || strcmp(mode, "early_wait") == 0) {
    MPI_Group_incl(world, 1, &other, &peer);
    int late_post = strcmp(mode, "late_post") == 0;
    if (rank == 0) {
      MPI_Win_start(peer, 0, win);
      if (!late_post)
        smpi_execute_benched(a);
      MPI_Put(src, 8, MPI_DOUBLE, 1, 0, 8, MPI_DOUBLE, win);
      if (!late_post)
        smpi_execute_benched(b);
      MPI_Win_complete(win);
    } else {
      if (late_post)
        smpi_execute_benched(a);
      MPI_Win_post(peer, 0, win);
      MPI_Win_wait(win);
    }
    MPI_Group_free(&peer);
  } else if (strcmp(mode, "fence") == 0) {
    MPI_Win_fence(0, win);
    if (rank == 1) {
      smpi_execute_benched(a);
      MPI_Put(src, 8, MPI_DOUBLE, 0, 0, 8, MPI_DOUBLE, win);
    } else if (rank == 2) {
      smpi_execute_benched(b);
    }
    MPI_Win_fence(0, win);
  } else if (strcmp(mode, "lock") == 0 || strcmp(mode, "lock_shared") == 0) {
    int shared = strcmp(mode, "lock_shared") == 0;
    if (rank == 0) {
      MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 2, 0, win);
      smpi_execute_benched(a);
      MPI_Put(src, 8, MPI_DOUBLE, 2, 0, 8, MPI_DOUBLE, win);
      MPI_Win_unlock(2, win);
    } else if (rank == 1) {
      smpi_execute_benched(b);
      MPI_Win_lock(shared ? MPI_LOCK_SHARED : MPI_LOCK_EXCLUSIVE, 2, 0, win);
      MPI_Put(src, 8, MPI_DOUBLE, 2, 8, 8, MPI_DOUBLE, win);
      MPI_Win_unlock(2, win);
    } else if (shared) {
      smpi_execute_benched(2 * b);
      MPI_Win_lock(MPI_LOCK_SHARED, 2, 0, win);
      MPI_Get(src, 8, MPI_DOUBLE, 2, 16, 8, MPI_DOUBLE, win);
      MPI_Win_unlock(2, win);
    }
  } else if (strcmp(mode, "accumulate") == 0) {
    MPI_Win_fence(0, win);
    if (rank == 0)
      MPI_Accumulate(src, 8, MPI_DOUBLE, 1, 0, 8, MPI_DOUBLE, MPI_SUM, win);
    MPI_Win_fence(0, win);
  } else if (strcmp(mode, "fetch") == 0) {
    double one = 1.0, old = 0.0;
    MPI_Win_fence(0, win);
    if (rank == 0)
      MPI_Fetch_and_op(&one, &old, MPI_DOUBLE, 1, 0, MPI_SUM, win);
    MPI_Win_fence(0, win);
  } else if (strcmp(mode, "lock_all") == 0) {
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Win_lock_all(0, win);
    smpi_execute_benched(rank == 1 ? a : b);
    MPI_Put(src, 8, MPI_DOUBLE, (rank + 1) % n, 8 * rank, 8, MPI_DOUBLE, win);
    MPI_Win_flush((rank + 1) % n, win);
    MPI_Accumulate(src, 8, MPI_DOUBLE, (rank + 2) % n, 32, 8, MPI_DOUBLE, MPI_SUM, win);
    MPI_Win_flush_all(win);
    MPI_Win_unlock_all(win);
  } else if (strcmp(mode, "neighbours") == 0) {
    int n;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (int it = 0; it < 2; it++) {
      MPI_Win_fence(it == 0 ? MPI_MODE_NOPRECEDE : 0, win);
      smpi_execute_benched(rank == 2 ? a : b);
      MPI_Put(src, 8, MPI_DOUBLE, (rank + 1) % n, 0, 8, MPI_DOUBLE, win);
      MPI_Put(src, 8, MPI_DOUBLE, (rank + n - 1) % n, 8, 8, MPI_DOUBLE, win);
      MPI_Win_fence(0, win);
    }
  } else if (strcmp(mode, "subcomm") == 0) {
    MPI_Comm half;
    MPI_Win sub;
    double* sub_base;
    MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &half);
    MPI_Win_allocate(8 * sizeof(double), sizeof(double), MPI_INFO_NULL, half, &sub_base, &sub);
    MPI_Win_fence(0, sub);
    MPI_Win_fence(0, sub);
    MPI_Win_free(&sub);
    MPI_Comm_free(&half);
  }
  MPI_Group_free(&world);
  MPI_Win_free(&win);
  MPI_Finalize();
  return 0;
}
