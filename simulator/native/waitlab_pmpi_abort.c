/* waitlab measurement layer: MPI_Abort (included by waitlab_pmpi.c).
 *
 * SMPI 3.32 prints "MPI_Abort was called" without the error code.  Before aborting, the layer prints one line
 * that waitlab's error message quotes (simulator/program_run.py):
 *   waitlab-layer: rank <world rank> called MPI_Abort(<MPI_COMM_WORLD|a communicator>, <code>) at simulated <t> s
 * It takes no simulated time and is printed with or without WAITLAB_OUT. */

int MPI_Abort(MPI_Comm comm, int errorcode)
{
  int world = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &world);
  fprintf(stderr, "waitlab-layer: rank %d called MPI_Abort(%s, %d) at simulated %.9f s\n", world,
          comm == MPI_COMM_WORLD ? "MPI_COMM_WORLD" : "a communicator", errorcode, simgrid_get_clock());
  fflush(stderr);
  return PMPI_Abort(comm, errorcode);
}
