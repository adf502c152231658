/* waitlab_pmpi_poll.c: polls (failed MPI_Test*, MPI_Request_get_status, MPI_Iprobe, MPI_Probe) booked as MPI time.
 * Part of waitlab's measurement layer: #included by waitlab_pmpi.c (one translation unit, so the static
 * helpers and state of waitlab_pmpi.c are shared).  Not compiled on its own.
 *
 * A poll that finds nothing completes nothing, yet the rank spends its time inside MPI: SMPI sleeps in every failed
 * MPI_Test and MPI_Iprobe (smpi/test, smpi/iprobe: 1e-4 s times the failed polls so far), and a blocking MPI_Probe
 * is such a loop.  Polls are kept as one pending "run" (not yet a record):
 *
 *   - a run is a sequence of polls back to back (the next one entered at most WL_POLL_GAP after the previous one
 *     returned: no computation in between) for the same thing: requests (the run keeps the union of the handles
 *     polled), or messages of one communicator (until a probe finds one: then only probes and receives of it);
 *   - the call right after the run that completes one of its requests (MPI_Test*, MPI_Wait* that completes it), or
 *     the blocking receive right after a probe (MPI_Recv of a message the probes accept), takes the run: that call's
 *     record enters when the run's first poll entered, so the wait rules see the whole time the rank waited (a late
 *     sender covers the polling);
 *   - any other record first writes the run as a `test` record spanning it (at its first poll's call site): MPI
 *     time, never the region's computation.  A run that took no simulated time (smpi/test = 0) is not written.
 *     (It carries no call name: the event table's `call` column would then exist in runs without any wait state,
 *     whose empty wait table models/analysis/waitstates.call_ops cannot type.)
 *
 * So a busy polling loop is one wait of the completing call, and polls between slices of computation (OSU's
 * MPI_Test probes) are each MPI time of their own while the computation stays computation. */

/* Longest gap (simulated seconds) between one poll's exit and the next call's entry for them to be back to back:
 * SMPI discards bursts of measured computation under 1 us (smpi/cpu-threshold), and a loop's few counted blocks
 * cost nanoseconds. */
#define WL_POLL_GAP 1e-6

enum { WL_POLL_NONE = 0, WL_POLL_REQS, WL_POLL_PROBE, WL_POLL_FOUND };

typedef struct {
  int kind;        /* WL_POLL_*: nothing pending, request polls, failed probes, a probe that found a message */
  double t0, t1;   /* entry of the run's first poll, exit of its last */
  uint64_t site;   /* call site of the first poll */
  uintptr_t* keys; /* request polls: the handles polled (union) */
  int64_t n_keys, cap_keys;
  MPI_Comm comm;   /* probes: their communicator, and the source (a rank of comm) and tag of the message found */
  int src, tag;    /* (WL_POLL_FOUND; WL_POLL_PROBE: the last probe's arguments) */
} wl_poll_t;

static wl_poll_t wl_poll = {WL_POLL_NONE, 0.0, 0.0, 0, NULL, 0, 0, MPI_COMM_NULL, 0, 0};

/* Write the pending run (if any) as a `test` record: MPI time of no request waitlab completes. */
static void wl_poll_flush(void)
{
  if (wl_poll.kind == WL_POLL_NONE)
    return;
  wl_poll.kind = WL_POLL_NONE;
  wl_poll.n_keys = 0;
  if (wl_poll.t1 > wl_poll.t0)
    wl_push(WL_TEST, wl_poll.t0, wl_poll.t1, -1, 0, 0, 0.0, 0.0, -1, wl_poll.site, 0);
}

/* Whether the pending run ended right before now (no computation since). */
static int wl_poll_follows(void) { return wl_poll.kind != WL_POLL_NONE && wl_now() - wl_poll.t1 <= WL_POLL_GAP; }

/* Whether a call on the requests keys[0..n) continues or ends the pending run: request polls right before it that
 * polled one of them. */
static int wl_poll_keeps_reqs(int n, const uintptr_t* keys)
{
  if (wl_poll.kind != WL_POLL_REQS || !wl_poll_follows())
    return 0;
  for (int i = 0; i < n; i++)
    for (int64_t j = 0; keys[i] != 0 && j < wl_poll.n_keys; j++)
      if (wl_poll.keys[j] == keys[i])
        return 1;
  return 0;
}

/* Whether a probe or a blocking receive (source src, tag tag of comm; wildcards allowed) continues or ends the
 * pending run: probes of comm right before it that found nothing yet (the rank was waiting for a message of comm),
 * or that found a message it accepts. */
static int wl_poll_keeps_msg(MPI_Comm comm, int src, int tag)
{
  if ((wl_poll.kind != WL_POLL_PROBE && wl_poll.kind != WL_POLL_FOUND) || !wl_poll_follows() || comm != wl_poll.comm)
    return 0;
  return wl_poll.kind == WL_POLL_PROBE ||
         ((src == MPI_ANY_SOURCE || src == wl_poll.src) && (tag == MPI_ANY_TAG || tag == wl_poll.tag));
}

/* The entry time of a call that ends the pending run: the run's first entry (the run is taken, no record of its
 * own), or t0 when nothing is pending (a call that does not keep the run flushed it before it began). */
static double wl_poll_take(double t0)
{
  if (wl_poll.kind == WL_POLL_NONE)
    return t0;
  wl_poll.kind = WL_POLL_NONE;
  wl_poll.n_keys = 0;
  return wl_poll.t0;
}

/* Start a run with the poll [t0, t1], or extend the pending one (kept by the poll's WL_BEGIN_KEEP). */
static void wl_poll_extend(int kind, double t0, double t1, uint64_t site)
{
  if (wl_poll.kind == WL_POLL_NONE) {
    wl_poll.t0 = t0;
    wl_poll.site = site;
    wl_poll.n_keys = 0;
  }
  wl_poll.kind = kind;
  wl_poll.t1 = t1;
}

/* A request poll that completed nothing: MPI_Test(all, any, some) without completion, MPI_Request_get_status. */
static void wl_poll_reqs(double t0, double t1, int n, const uintptr_t* keys, uint64_t site)
{
  wl_poll_extend(WL_POLL_REQS, t0, t1, site);
  /* the common case, a loop polling one array: the same requests in the same order, nothing to add */
  int64_t k = 0;
  int same = 1;
  for (int i = 0; i < n && same; i++)
    if (keys[i] != 0)
      same = k < wl_poll.n_keys && wl_poll.keys[k++] == keys[i];
  if (same && k == wl_poll.n_keys)
    return;
  for (int i = 0; i < n; i++) {
    if (keys[i] == 0)
      continue;
    int64_t j = 0;
    while (j < wl_poll.n_keys && wl_poll.keys[j] != keys[i])
      j++;
    if (j < wl_poll.n_keys)
      continue;
    wl_poll.keys = wl_grow(wl_poll.keys, &wl_poll.cap_keys, wl_poll.n_keys + 1, sizeof(uintptr_t));
    wl_poll.keys[wl_poll.n_keys++] = keys[i];
  }
}

/* A probe (MPI_Iprobe, MPI_Probe) of comm with arguments src, tag; found: the status of the message it found, NULL
 * when it found none. */
static void wl_poll_probe(double t0, double t1, MPI_Comm comm, int src, int tag, const MPI_Status* found,
                          uint64_t site)
{
  wl_poll_extend(found ? WL_POLL_FOUND : WL_POLL_PROBE, t0, t1, site);
  wl_poll.comm = comm;
  wl_poll.src = found ? found->MPI_SOURCE : src;
  wl_poll.tag = found ? found->MPI_TAG : tag;
}
