/* waitlab measurement layer: the MPI library's one-sided protocol (WAITLAB_RMA_PROTOCOL).
 *
 * #included by waitlab_pmpi_rma.c (one translation unit).  SMPI 3.32 implements MPI-2 one-sided
 * synchronisation with almost no protocol (docs/rma.md): a passive MPI_Win_lock/MPI_Win_unlock sends nothing,
 * and an MPI_Put costs one detached message whatever the epoch.  With WAITLAB_RMA_PROTOCOL=mvapich2 the layer
 * adds the messages an MVAPICH2-class library sends, as REAL messages through SimGrid (so the network model and
 * contention apply to them), on a hidden window created next to every user window (same communicator, every rank
 * holding a shared lock on it all the time, so it never synchronises anything by itself):
 *   wl_ctl_to(t)    one 8-byte message origin -> target; returns when it has arrived (MPI_Put + MPI_Win_flush);
 *   wl_ctl_from(t)  one 8-byte message target -> origin; returns when it has arrived (MPI_Get + MPI_Win_flush:
 *                   SMPI starts a get's data send on the target's behalf, the target need not call MPI).
 * The protocol (docs/rma.md, "MPI library protocol"):
 *   passive target (MPICH2 CH3 as in MVAPICH2, ch3u_rma_sync.c: lock packet, lock-granted packet, operations,
 *     the last one carrying the unlock, "pt rma done" packet):
 *     lock   = lock request (to) + SMPI's mutex + grant (from);
 *     put    = [rendezvous at >= WAITLAB_RMA_EAGER bytes: RTS (to) + CTS (from)] + the data, the origin waiting
 *              for its delivery before the next operation (the target handles one operation at a time);
 *     unlock = the unlock travels with the last operation (a separate request only if there was none) + SMPI's
 *              unlock + done acknowledgement (from).
 *   active target (Jiang et al., CCGrid 2004: post and complete are RDMA-written flags, the origin sees an RDMA
 *     write complete only with the responder's acknowledgement; MVAPICH2 1.x ch3u_rma_ops.c MPIDI_Put and
 *     rdma_iba_1sc.c MPIDI_CH3I_RDMA_try_rma / iba_put / MPIDI_CH3I_RDMA_finish_rma for the data path):
 *     post     = SMPI's notification to every origin;  start = SMPI's wait for them;
 *     put of more than WL_RDMA_PUT_THRESHOLD bytes = a direct RDMA write, issued at once and not waited for
 *                (MPI_Put returns); the writes of one queue pair leave the HCA in order, so a later write to the
 *                same target starts when this one is delivered, and its acknowledgement is left outstanding;
 *     put of at most WL_RDMA_PUT_THRESHOLD bytes (MVAPICH2 queues it and sends a packet): the data (delivered) +
 *                its completion acknowledgement (from), one at a time (an assumption from He et al.'s table 3);
 *     complete = the completion of the direct writes (finish_rma: the last one delivered + its acknowledgement,
 *                from, per target that got any), then SMPI's done notification to every target and the done
 *                flag's completion: its arrival (to: a message travelling with SMPI's) and acknowledgement (from);
 *     wait     = SMPI's wait for every origin's done notification (and the data).
 *     Not modelled from MVAPICH2 1.x: post waiting for its flag write's completion, and complete not waiting
 *     for the completion-counter write (Decrease_CC); docs/rma.md gives their measured effect.
 * Fence, lock_all/unlock_all, get, flush and the request-based operations keep SMPI's semantics.  Default (unset
 * or "smpi"): nothing added.  The C wrappers (waitlab_pmpi_rma.c) and the Fortran ones (waitlab_pmpi_rma_f.c) call
 * wl_mv2_pre before and wl_mv2_post after the real call.
 */

#define WL_RMA_SMPI 0
#define WL_RMA_MVAPICH2 1
#define WL_CTL_BYTES 8
/* MVAPICH2 1.x rdma_put_fallback_threshold (8 KB for Mellanox HCAs, rdma_iba_priv.c): larger puts of an access
 * epoch are direct RDMA writes ("size > rdma_put_fallback_threshold" in MPIDI_CH3I_RDMA_try_rma). */
#define WL_RDMA_PUT_THRESHOLD 8192

static int wl_rma_proto_ = -1;
static long wl_rma_eager_ = 65536;

/* The protocol chosen for this run (read once from the environment). */
static int wl_rma_proto(void)
{
  if (wl_rma_proto_ < 0) {
    const char* p = getenv("WAITLAB_RMA_PROTOCOL");
    if (p == NULL || *p == '\0' || strcmp(p, "smpi") == 0)
      wl_rma_proto_ = WL_RMA_SMPI;
    else if (strcmp(p, "mvapich2") == 0)
      wl_rma_proto_ = WL_RMA_MVAPICH2;
    else
      wl_die("WAITLAB_RMA_PROTOCOL must be smpi or mvapich2");
    const char* e = getenv("WAITLAB_RMA_EAGER");
    if (e != NULL && *e != '\0')
      wl_rma_eager_ = atol(e);
  }
  return wl_rma_proto_;
}

/* Create the hidden control window of `w` (collective over the window's communicator). */
static void wl_ctl_create(wl_win_t* w, MPI_Comm comm)
{
  w->ctl = MPI_WIN_NULL;
  w->ctl_buf = NULL;
  w->gats_n = 0;
  w->gats = NULL;
  w->locked = NULL;
  w->ops = NULL;
  w->rdma = NULL;
  if (wl_rma_proto() != WL_RMA_MVAPICH2)
    return;
  size_t n = (size_t)(w->size > 0 ? w->size : 1);
  w->ctl_buf = calloc(2 * WL_CTL_BYTES, 1);
  w->locked = calloc(n, sizeof(int));
  w->ops = calloc(n, sizeof(int));
  w->rdma = calloc(n, sizeof(int));
  if (w->ctl_buf == NULL || w->locked == NULL || w->ops == NULL || w->rdma == NULL)
    wl_die("out of memory");
  PMPI_Win_create(w->ctl_buf, WL_CTL_BYTES, 1, MPI_INFO_NULL, comm, &w->ctl);
  PMPI_Win_lock_all(0, w->ctl);
}

static void wl_ctl_free(wl_win_t* w)
{
  if (w->ctl != MPI_WIN_NULL) {
    PMPI_Win_unlock_all(w->ctl);
    PMPI_Win_free(&w->ctl);
  }
  free(w->ctl_buf);
  free(w->gats);
  free(w->locked);
  free(w->ops);
  free(w->rdma);
  w->ctl_buf = NULL;
  w->gats = NULL;
  w->locked = NULL;
  w->ops = NULL;
  w->rdma = NULL;
}

/* One control message to target rank t of the window (returns when delivered). */
static void wl_ctl_to(wl_win_t* w, int t)
{
  PMPI_Put(w->ctl_buf, WL_CTL_BYTES, MPI_BYTE, t, 0, WL_CTL_BYTES, MPI_BYTE, w->ctl);
  PMPI_Win_flush(t, w->ctl);
}

/* One control message from target rank t of the window to this rank (returns when delivered). */
static void wl_ctl_from(wl_win_t* w, int t)
{
  PMPI_Get(w->ctl_buf + WL_CTL_BYTES, WL_CTL_BYTES, MPI_BYTE, t, 0, WL_CTL_BYTES, MPI_BYTE, w->ctl);
  PMPI_Win_flush(t, w->ctl);
}

/* Is the protocol on for window `w` and target t (another rank of the window)? */
static int wl_mv2(const wl_win_t* w, int t)
{
  return w != NULL && w->ctl != MPI_WIN_NULL && t >= 0 && t < w->size && t != w->me;
}

/* MPI_Win_start: remember the targets (window ranks), to acknowledge their done notifications at complete. */
static void wl_mv2_start(wl_win_t* w, MPI_Group group)
{
  if (w == NULL || w->ctl == MPI_WIN_NULL)
    return;
  MPI_Group wg;
  PMPI_Win_get_group(w->win, &wg);
  int n = 0;
  PMPI_Group_size(group, &n);
  free(w->gats);
  w->gats = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  if (w->gats == NULL)
    wl_die("out of memory");
  for (int i = 0; i < n; i++)
    PMPI_Group_translate_ranks(group, 1, &i, wg, &w->gats[i]);
  PMPI_Group_free(&wg);
  w->gats_n = n;
}

/* MPI_Win_complete, before SMPI's done notification: the completion of the direct RDMA writes (finish_rma). */
static void wl_mv2_finish_rma(wl_win_t* w)
{
  if (w == NULL || w->ctl == MPI_WIN_NULL)
    return;
  for (int i = 0; i < w->gats_n; i++) {
    int t = w->gats[i];
    if (wl_mv2(w, t) && w->rdma[t] > 0) {
      PMPI_Win_flush(t, w->win); /* the last write is delivered */
      wl_ctl_from(w, t);         /* and acknowledged (the earlier acknowledgements came back meanwhile) */
      w->rdma[t] = 0;
    }
  }
}

/* MPI_Win_complete, after SMPI sent its done notifications: wait for the completion of each (arrival + ack). */
static void wl_mv2_complete(wl_win_t* w)
{
  if (w == NULL || w->ctl == MPI_WIN_NULL)
    return;
  for (int i = 0; i < w->gats_n; i++)
    if (wl_mv2(w, w->gats[i])) {
      wl_ctl_to(w, w->gats[i]);   /* the done flag reaches the target (SMPI's notification travels with it) */
      wl_ctl_from(w, w->gats[i]); /* and its completion acknowledgement comes back */
    }
  w->gats_n = 0;
}

/* Does a put/accumulate of `bytes` to t go as a direct RDMA write (in an access epoch, above the threshold)? */
static int wl_mv2_rdma(const wl_win_t* w, int code, double bytes)
{
  return w->gats_n > 0 && code == WL_PUT && bytes > (double)WL_RDMA_PUT_THRESHOLD; /* accumulates: packets */
}

/* Before a put/accumulate of `bytes` to t: a direct RDMA write waits for the previous one on its queue pair to be
 * delivered; a passive-target operation from the eager threshold on has a rendezvous handshake. */
static void wl_mv2_before_op(wl_win_t* w, int code, int t, double bytes)
{
  if (wl_mv2_rdma(w, code, bytes)) {
    if (w->rdma[t] > 0)
      PMPI_Win_flush(t, w->win);
    return;
  }
  if (w->gats_n > 0 || w->locked[t] == 0)
    return;
  if (bytes >= (double)wl_rma_eager_) {
    wl_ctl_to(w, t);   /* RTS */
    wl_ctl_from(w, t); /* CTS */
  }
}

/* After a put/accumulate of `bytes` to t: a direct RDMA write is left in flight; in an access epoch, a packet is
 * delivered and acknowledged before the next operation; in a lock epoch, an operation is delivered. */
static void wl_mv2_after_op(wl_win_t* w, int code, int t, double bytes)
{
  if (wl_mv2_rdma(w, code, bytes)) {
    w->rdma[t]++;
  } else if (w->gats_n > 0) {
    PMPI_Win_flush(t, w->win);
    wl_ctl_from(w, t);
  } else if (w->locked[t] > 0) {
    PMPI_Win_flush(t, w->win);
    w->ops[t]++;
  }
}

/* The protocol's part before an RMA call `code` on window `win` (target t: a window rank; bytes moved). */
static void wl_mv2_pre(int code, MPI_Win win, int t, double bytes)
{
  wl_win_t* w = wl_win_find(win);
  if (code == WL_WIN_COMPLETE) {
    wl_mv2_finish_rma(w);
    return;
  }
  if (!wl_mv2(w, t))
    return;
  if (code == WL_WIN_LOCK || code == WL_WIN_LOCK_SHARED) {
    wl_ctl_to(w, t); /* lock request */
  } else if (code == WL_PUT || code == WL_ACCUMULATE) {
    wl_mv2_before_op(w, code, t, bytes);
  } else if (code == WL_WIN_UNLOCK && w->locked[t] > 0) {
    PMPI_Win_flush(t, win); /* the operations are delivered; the unlock travels with the last one */
    if (w->ops[t] == 0)
      wl_ctl_to(w, t); /* no operation: a separate unlock request */
  }
}

/* The protocol's part after a successful RMA call `code` (group: the group of MPI_Win_start; bytes moved). */
static void wl_mv2_post(int code, MPI_Win win, int t, MPI_Group group, double bytes)
{
  wl_win_t* w = wl_win_find(win);
  if (code == WL_WIN_START) {
    wl_mv2_start(w, group);
  } else if (code == WL_WIN_COMPLETE) {
    wl_mv2_complete(w);
  } else if (!wl_mv2(w, t)) {
    return;
  } else if (code == WL_WIN_LOCK || code == WL_WIN_LOCK_SHARED) {
    wl_ctl_from(w, t); /* lock granted */
    w->locked[t]++;
  } else if (code == WL_PUT || code == WL_ACCUMULATE) {
    wl_mv2_after_op(w, code, t, bytes);
  } else if (code == WL_WIN_UNLOCK && w->locked[t] > 0) {
    wl_ctl_from(w, t); /* done acknowledgement */
    w->locked[t]--;
    w->ops[t] = 0;
  }
}
