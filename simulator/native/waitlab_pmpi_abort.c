/* waitlab measurement layer: MPI_Abort, and the call a rank killed by SimGrid is in (included by waitlab_pmpi.c).
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

/* A rank SimGrid kills inside an MPI call (a deadlock: SimGrid runs every actor's on-exit hook, in the actor, before
 * it ends) prints the call it is in (wl_in), one line that waitlab's error message quotes (simulator/program_run.py):
 *   waitlab-layer: rank <world rank> ended inside <call> from <r>|to <r>|root <r>|from <r> to <r> tag <t> site 0x<off>
 * ("from any", "tag any" for MPI_ANY_SOURCE and MPI_ANY_TAG; peers as MPI_COMM_WORLD ranks; the site as the records
 * have it).  Registered by wl_start; a rank that returns from main reports nothing. */
static void wl_put_peer(char* out, size_t n, const char* word, int peer)
{
  if (peer == MPI_ANY_SOURCE)
    snprintf(out, n, " %s any", word);
  else if (peer == MPI_PROC_NULL)
    snprintf(out, n, " %s none", word);
  else
    snprintf(out, n, " %s %d", word, wl_in.comm == MPI_COMM_WORLD ? peer : wl_world(wl_in.comm, peer));
}

static void wl_report_inside(int failed, void* data)
{
  (void)data;
  if (!failed || wl_in.call == NULL)
    return;
  char a[48] = "", b[48] = "", t[32] = "";
  switch (wl_in.kind) {
    case WL_IN_FROM:
      wl_put_peer(a, sizeof a, "from", wl_in.peer);
      break;
    case WL_IN_TO:
      wl_put_peer(a, sizeof a, "to", wl_in.peer);
      break;
    case WL_IN_BOTH:
      wl_put_peer(a, sizeof a, "from", wl_in.peer);
      wl_put_peer(b, sizeof b, "to", wl_in.peer2);
      break;
    case WL_IN_ROOT:
      wl_put_peer(a, sizeof a, "root", wl_in.peer);
      break;
    default:
      break;
  }
  if (wl_in.kind != 0 && wl_in.kind != WL_IN_ROOT) {
    if (wl_in.tag == MPI_ANY_TAG)
      snprintf(t, sizeof t, " tag any");
    else
      snprintf(t, sizeof t, " tag %d", wl_in.tag);
  }
  fprintf(stderr, "waitlab-layer: rank %d ended inside %s%s%s%s site 0x%llx\n", wl_rank, wl_in.call, a, b, t,
          (unsigned long long)wl_site(wl_in.ra));
  fflush(stderr);
}
