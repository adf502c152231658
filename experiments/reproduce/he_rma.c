/* He et al. (section 6.1, msg-test-2 and msg-test-4): MPI one-sided put latency and bandwidth.
 *
 * Usage: he_rma MODE SIZE ITERS
 *   MODE  latency-active   pingpong: origin start-put-complete, target post-wait, then the roles swap;
 *                          latency = round trip / 2, timed with MPI_Wtime on rank 0.
 *         latency-passive  origin lock-put-unlock (exclusive), target does nothing; time per epoch on rank 0.
 *         bw-active        start, 32 puts, complete; the target's post-wait then answers with a 0-byte
 *                          message, so rank 0 times delivery, not only the return of MPI_Win_complete.
 *         bw-passive       lock, 32 puts, unlock (exclusive); time per epoch on rank 0.
 * Prints one line: "RESULT MODE SIZE SECONDS" (seconds per put for latency, per epoch for bandwidth).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PUTS_PER_EPOCH 32

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 4 || size != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: he_rma MODE SIZE ITERS (2 ranks)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = argv[1];
    long bytes = atol(argv[2]);
    int iters = atoi(argv[3]);
    int bw = strncmp(mode, "bw-", 3) == 0;
    long window_bytes = bw ? bytes * PUTS_PER_EPOCH : bytes;
    char *buf = calloc((size_t)window_bytes + 1, 1);
    char *src = calloc((size_t)bytes + 1, 1);
    MPI_Win win;
    MPI_Win_create(buf, window_bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Group world, peer;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int other = 1 - rank;
    MPI_Group_incl(world, 1, &other, &peer);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
        if (!strcmp(mode, "latency-active")) {
            for (int turn = 0; turn < 2; turn++) {
                if (rank == turn) {
                    MPI_Win_start(peer, 0, win);
                    MPI_Put(src, (int)bytes, MPI_BYTE, other, 0, (int)bytes, MPI_BYTE, win);
                    MPI_Win_complete(win);
                } else {
                    MPI_Win_post(peer, 0, win);
                    MPI_Win_wait(win);
                }
            }
        } else if (!strcmp(mode, "latency-passive")) {
            if (rank == 0) {
                MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
                MPI_Put(src, (int)bytes, MPI_BYTE, 1, 0, (int)bytes, MPI_BYTE, win);
                MPI_Win_unlock(1, win);
            }
        } else if (!strcmp(mode, "bw-active")) {
            if (rank == 0) {
                MPI_Win_start(peer, 0, win);
                for (int k = 0; k < PUTS_PER_EPOCH; k++)
                    MPI_Put(src, (int)bytes, MPI_BYTE, 1, (MPI_Aint)k * bytes, (int)bytes, MPI_BYTE, win);
                MPI_Win_complete(win);
                MPI_Recv(NULL, 0, MPI_BYTE, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Win_post(peer, 0, win);
                MPI_Win_wait(win);
                MPI_Send(NULL, 0, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
            }
        } else if (!strcmp(mode, "bw-passive")) {
            if (rank == 0) {
                MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win);
                for (int k = 0; k < PUTS_PER_EPOCH; k++)
                    MPI_Put(src, (int)bytes, MPI_BYTE, 1, (MPI_Aint)k * bytes, (int)bytes, MPI_BYTE, win);
                MPI_Win_unlock(1, win);
            }
        } else {
            if (rank == 0)
                fprintf(stderr, "unknown mode %s\n", mode);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    double t1 = MPI_Wtime();
    double per = (t1 - t0) / iters;
    if (!strcmp(mode, "latency-active"))
        per /= 2.0; /* two one-way puts per iteration */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("RESULT %s %ld %.9e\n", mode, bytes, per);
    MPI_Group_free(&peer);
    MPI_Group_free(&world);
    MPI_Win_free(&win);
    free(buf);
    free(src);
    MPI_Finalize();
    return 0;
}
