/* waitlab RMA timing program: rank 0 puts argv[2] bytes to rank 1 in one epoch of kind argv[1]
 * (pscw: post/start/complete/wait, lock: lock/put/unlock, fence: fence/put/fence), argv[3] times (default 1),
 * argv[4] puts per pscw epoch (default 1; they go to consecutive parts of the window).
 * The measurement layer records every call; the target's closing call (win_wait, fence) shows delivery. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* mode = argc > 1 ? argv[1] : "pscw";
  int bytes = argc > 2 ? atoi(argv[2]) : 4;
  int reps = argc > 3 ? atoi(argv[3]) : 1;
  int puts = argc > 4 ? atoi(argv[4]) : 1;
  char* src = calloc((size_t)bytes, 1);
  char* base;
  MPI_Win win;
  MPI_Win_allocate((MPI_Aint)bytes * puts, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  MPI_Group world, peer;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int other = 1 - rank;
  MPI_Group_incl(world, 1, &other, &peer);
  for (int i = 0; i < reps; i++) {
    if (strcmp(mode, "pscw") == 0) {
      if (rank == 0) {
        MPI_Win_start(peer, 0, win);
        for (int k = 0; k < puts; k++)
          MPI_Put(src, bytes, MPI_BYTE, 1, (MPI_Aint)k * bytes, bytes, MPI_BYTE, win);
        MPI_Win_complete(win);
      } else {
        MPI_Win_post(peer, 0, win);
        MPI_Win_wait(win);
      }
    } else if (strcmp(mode, "lock") == 0) {
      if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
        MPI_Put(src, bytes, MPI_BYTE, 1, 0, bytes, MPI_BYTE, win);
        MPI_Win_unlock(1, win);
      }
    } else {
      MPI_Win_fence(0, win);
      if (rank == 0)
        MPI_Put(src, bytes, MPI_BYTE, 1, 0, bytes, MPI_BYTE, win);
      MPI_Win_fence(0, win);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Group_free(&peer);
  MPI_Group_free(&world);
  MPI_Win_free(&win);
  free(src);
  MPI_Finalize();
  return 0;
}
