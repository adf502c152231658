/* waitlab test program: collectives called with MPI_IN_PLACE (tests/test_inplace_collectives.py), 4 ranks.
 *
 *   inplace_collectives allgather   rank 2 computes 0.1 s, then MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL,
 *                                   g, 3, MPI_DOUBLE); rank 1 computes 0.1 s, then MPI_Allgatherv(MPI_IN_PLACE, 0,
 *                                   MPI_DATATYPE_NULL, g, {1, 2, 3, 4}, {0, 1, 3, 6}, MPI_DOUBLE)
 *   inplace_collectives others      no delays; every other collective that takes MPI_IN_PLACE, the ignored count 0
 *                                   and datatype MPI_DATATYPE_NULL wherever MPI ignores them:
 *                                   MPI_Gather (root 1, 2 ints), MPI_Gatherv (root 1, counts {1, 2, 3, 4} ints),
 *                                   MPI_Scatter (root 2, 2 ints), MPI_Scatterv (root 2, counts {4, 3, 2, 1} ints),
 *                                   MPI_Alltoall (2 ints), MPI_Alltoallv (rank i and j exchange 1 + i + j ints),
 *                                   MPI_Iallgather (2 doubles) + MPI_Wait, MPI_Reduce (root 0), MPI_Allreduce
 *                                   (3 doubles each), MPI_Scan, MPI_Exscan (1 double), MPI_Reduce_scatter (1 double
 *                                   per rank) */
#include <mpi.h>
#include <smpi/smpi.h>
#include <string.h>

#define N 4

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != N)
    MPI_Abort(MPI_COMM_WORLD, 1);
  const char* mode = argc > 1 ? argv[1] : "allgather";
  double g[16] = {0};
  int b[32] = {0};

  if (strcmp(mode, "allgather") == 0) {
    int c[N] = {1, 2, 3, 4}, d[N] = {0, 1, 3, 6};
    if (rank == 2)
      smpi_execute_benched(0.1);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g, 3, MPI_DOUBLE, MPI_COMM_WORLD);
    if (rank == 1)
      smpi_execute_benched(0.1);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g, c, d, MPI_DOUBLE, MPI_COMM_WORLD);
  } else if (strcmp(mode, "others") == 0) {
    int gc[N] = {1, 2, 3, 4}, gd[N] = {0, 1, 3, 6}, sc[N] = {4, 3, 2, 1}, sd[N] = {0, 4, 7, 9};
    int ac[N], ad[N], rc[N] = {1, 1, 1, 1};
    for (int j = 0, at = 0; j < N; at += ac[j], j++) {
      ac[j] = 1 + rank + j;
      ad[j] = at;
    }
    MPI_Request req;
    if (rank == 1)
      MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, 2, MPI_INT, 1, MPI_COMM_WORLD);
    else
      MPI_Gather(b, 2, MPI_INT, NULL, 0, MPI_DATATYPE_NULL, 1, MPI_COMM_WORLD);
    if (rank == 1)
      MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, gc, gd, MPI_INT, 1, MPI_COMM_WORLD);
    else
      MPI_Gatherv(b, rank + 1, MPI_INT, NULL, NULL, NULL, MPI_DATATYPE_NULL, 1, MPI_COMM_WORLD);
    if (rank == 2)
      MPI_Scatter(b, 2, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, 2, MPI_COMM_WORLD);
    else
      MPI_Scatter(NULL, 0, MPI_DATATYPE_NULL, b, 2, MPI_INT, 2, MPI_COMM_WORLD);
    if (rank == 2)
      MPI_Scatterv(b, sc, sd, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, 2, MPI_COMM_WORLD);
    else
      MPI_Scatterv(NULL, NULL, NULL, MPI_DATATYPE_NULL, b, sc[rank], MPI_INT, 2, MPI_COMM_WORLD);
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b, 2, MPI_INT, MPI_COMM_WORLD);
    MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, b, ac, ad, MPI_INT, MPI_COMM_WORLD);
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g, 2, MPI_DOUBLE, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    if (rank == 0)
      MPI_Reduce(MPI_IN_PLACE, g, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    else
      MPI_Reduce(g, NULL, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, g, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Scan(MPI_IN_PLACE, g, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Exscan(MPI_IN_PLACE, g, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Reduce_scatter(MPI_IN_PLACE, g, rc, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
