/* waitlab measurement layer: one-sided communication (MPI RMA).
 *
 * #included at the end of waitlab_pmpi.c (one translation unit): uses its static helpers wl_push, wl_now,
 * wl_site, wl_comm_id, wl_bytes, wl_die and the injection hook WL_PRE, and nothing else of that file.
 *
 * Every RMA call is one record (action codes WL_WIN_* and WL_PUT... of waitlab_actions.h), so its time is booked
 * as MPI, not as compute:
 *   tag   = window id: the k-th window this rank created (0, 1, ...); windows on MPI_COMM_WORLD (or a duplicate)
 *           have the same id on every rank.  comm = the window's communicator id (wl_comm_id).
 *   peer  = target rank in MPI_COMM_WORLD (put/get/accumulate/lock/unlock/flush), -1 for "all".
 *   value = bytes moved at the origin (origin count x type size), window bytes for win_create,
 *           group size for win_post/win_start.
 * MPI_Win_post and MPI_Win_start are followed by one zero-duration WL_WIN_GROUP record per group member
 * (peer = the member's world rank), so the event table knows which exposure epoch an access epoch matches.
 * MPI_Win_lock is WL_WIN_LOCK (exclusive) or WL_WIN_LOCK_SHARED.  Rput/Rget are recorded as such (their request
 * completes in an MPI_Wait recorded as an untracked 'test'); Raccumulate as accumulate; Rget_accumulate,
 * Fetch_and_op and Compare_and_swap as get_accumulate.  MPI_Win_test is recorded as win_wait when it closes
 * the exposure epoch (flag true), else not at all.  MPI_Win_sync, attach/detach are not recorded.
 */

#define WL_RMA_MAX_WINS 4096

typedef struct {
  MPI_Win win;
  int id, comm, size, me;
  int* world; /* world rank of each rank of the window's group */
  /* the MPI library's protocol (waitlab_pmpi_rma_mv2.c): hidden control window, open access epoch, locks */
  MPI_Win ctl;
  char* ctl_buf;
  int gats_n; /* targets of the open access epoch (start .. complete), 0 if none */
  int* gats;  /* their window ranks */
  int* locked; /* per target (window rank): 1 while this rank holds a lock on it */
  int* ops;    /* per target: operations issued in the current lock epoch */
  int* rdma;   /* per target: direct RDMA writes of the access epoch whose completion is still outstanding */
} wl_win_t;

static wl_win_t wl_wins[WL_RMA_MAX_WINS];
static int wl_n_wins = 0; /* windows created so far (ids are never reused) */

#define WL_RMA_BEGIN()                                                                                                 \
  const void* ra_ = __builtin_return_address(0);                                                                       \
  if (wl_on) {                                                                                                         \
    wl_charge_counted();                                                                                               \
    WL_PRE();                                                                                                          \
  }                                                                                                                    \
  double t0_ = wl_now()

static wl_win_t* wl_win_find(MPI_Win win)
{
  for (int i = wl_n_wins - 1; i >= 0; i--)
    if (wl_wins[i].win == win && wl_wins[i].world != NULL)
      return &wl_wins[i];
  return NULL;
}

#include "waitlab_pmpi_rma_mv2.c"

static void wl_win_add(MPI_Win win, MPI_Comm comm, double t0, const void* ra, double bytes, int disp_unit)
{
  if (wl_n_wins >= WL_RMA_MAX_WINS)
    wl_die("too many MPI windows created (waitlab records at most 4096)");
  wl_win_t* w = &wl_wins[wl_n_wins];
  w->win = win;
  w->id = wl_n_wins++;
  w->comm = wl_comm_id(comm);
  MPI_Group g, world;
  PMPI_Win_get_group(win, &g);
  PMPI_Comm_group(MPI_COMM_WORLD, &world);
  PMPI_Group_size(g, &w->size);
  PMPI_Comm_rank(comm, &w->me);
  int* idx = malloc(sizeof(int) * (size_t)(w->size > 0 ? w->size : 1));
  w->world = malloc(sizeof(int) * (size_t)(w->size > 0 ? w->size : 1));
  if (idx == NULL || w->world == NULL)
    wl_die("out of memory");
  for (int i = 0; i < w->size; i++)
    idx[i] = i;
  PMPI_Group_translate_ranks(g, w->size, idx, world, w->world);
  free(idx);
  PMPI_Group_free(&g);
  PMPI_Group_free(&world);
  wl_ctl_create(w, comm);
  wl_push(WL_WIN_CREATE, t0, wl_now(), -1, w->id, w->comm, bytes, (double)disp_unit, -1, wl_site(ra), 0);
}

/* World rank of rank r of the window (-1 for MPI_PROC_NULL or an unknown window). */
static int wl_win_peer(const wl_win_t* w, int r)
{
  if (w == NULL || r < 0 || r >= w->size)
    return -1;
  return w->world[r];
}

/* One record of an RMA call on window `win` (no record if waitlab is off or the window is unknown). */
static int64_t wl_rma(int code, MPI_Win win, int target, double value, double value2, double t0, const void* ra)
{
  const wl_win_t* w = wl_win_find(win);
  if (!wl_on || w == NULL)
    return -1;
  return wl_push(code, t0, wl_now(), target < 0 ? -1 : wl_win_peer(w, target), w->id, w->comm, value, value2, -1,
                 wl_site(ra), 0);
}

/* win_post/win_start and one WL_WIN_GROUP record per member of `group`. */
static void wl_rma_group(int code, MPI_Win win, MPI_Group group, double t0, const void* ra)
{
  const wl_win_t* w = wl_win_find(win);
  if (!wl_on || w == NULL)
    return;
  int n = 0;
  PMPI_Group_size(group, &n);
  double t1 = wl_now();
  wl_push(code, t0, t1, -1, w->id, w->comm, (double)n, 0.0, -1, wl_site(ra), 0);
  MPI_Group world;
  PMPI_Comm_group(MPI_COMM_WORLD, &world);
  for (int i = 0; i < n; i++) {
    int r = -1;
    PMPI_Group_translate_ranks(group, 1, &i, world, &r);
    wl_push(WL_WIN_GROUP, t1, t1, r, w->id, w->comm, 0.0, 0.0, -1, wl_site(ra), 0);
  }
  PMPI_Group_free(&world);
}

/* ---- windows -------------------------------------------------------------------------------------------------- */

int MPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win* win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Win_create(base, size, disp_unit, info, comm, win);
  if (wl_on && rc == MPI_SUCCESS)
    wl_win_add(*win, comm, t0_, ra_, (double)size, disp_unit);
  return rc;
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* base, MPI_Win* win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Win_allocate(size, disp_unit, info, comm, base, win);
  if (wl_on && rc == MPI_SUCCESS)
    wl_win_add(*win, comm, t0_, ra_, (double)size, disp_unit);
  return rc;
}

int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* base, MPI_Win* win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Win_allocate_shared(size, disp_unit, info, comm, base, win);
  if (wl_on && rc == MPI_SUCCESS)
    wl_win_add(*win, comm, t0_, ra_, (double)size, disp_unit);
  return rc;
}

int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win* win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Win_create_dynamic(info, comm, win);
  if (wl_on && rc == MPI_SUCCESS)
    wl_win_add(*win, comm, t0_, ra_, 0.0, 1);
  return rc;
}

int MPI_Win_free(MPI_Win* win)
{
  WL_RMA_BEGIN();
  wl_win_t* w = win ? wl_win_find(*win) : NULL;
  if (w != NULL)
    wl_ctl_free(w);
  int rc = PMPI_Win_free(win);
  if (wl_on && rc == MPI_SUCCESS && w != NULL) {
    wl_push(WL_WIN_FREE, t0_, wl_now(), -1, w->id, w->comm, 0.0, 0.0, -1, wl_site(ra_), 0);
    free(w->world);
    w->world = NULL; /* the handle may be reused by a later window: never match this entry again */
  }
  return rc;
}

/* ---- active target: fence, post/start/complete/wait ----------------------------------------------------------- */

int MPI_Win_fence(int assert_, MPI_Win win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Win_fence(assert_, win);
  if (rc == MPI_SUCCESS)
    wl_rma(WL_WIN_FENCE, win, -1, 0.0, (double)assert_, t0_, ra_);
  return rc;
}

int MPI_Win_post(MPI_Group group, int assert_, MPI_Win win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Win_post(group, assert_, win);
  if (rc == MPI_SUCCESS)
    wl_rma_group(WL_WIN_POST, win, group, t0_, ra_);
  return rc;
}

int MPI_Win_start(MPI_Group group, int assert_, MPI_Win win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Win_start(group, assert_, win);
  if (rc == MPI_SUCCESS)
    wl_mv2_post(WL_WIN_START, win, -1, group, 0.0);
  if (rc == MPI_SUCCESS)
    wl_rma_group(WL_WIN_START, win, group, t0_, ra_);
  return rc;
}

int MPI_Win_complete(MPI_Win win)
{
  WL_RMA_BEGIN();
  wl_mv2_pre(WL_WIN_COMPLETE, win, -1, 0.0);
  int rc = PMPI_Win_complete(win);
  if (rc == MPI_SUCCESS)
    wl_mv2_post(WL_WIN_COMPLETE, win, -1, MPI_GROUP_NULL, 0.0);
  if (rc == MPI_SUCCESS)
    wl_rma(WL_WIN_COMPLETE, win, -1, 0.0, 0.0, t0_, ra_);
  return rc;
}

int MPI_Win_wait(MPI_Win win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Win_wait(win);
  if (rc == MPI_SUCCESS)
    wl_rma(WL_WIN_WAIT, win, -1, 0.0, 0.0, t0_, ra_);
  return rc;
}

int MPI_Win_test(MPI_Win win, int* flag)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Win_test(win, flag);
  if (rc == MPI_SUCCESS && *flag)
    wl_rma(WL_WIN_WAIT, win, -1, 0.0, 1.0, t0_, ra_);
  return rc;
}

/* ---- passive target: lock/unlock, flush ----------------------------------------------------------------------- */

int MPI_Win_lock(int lock_type, int rank, int assert_, MPI_Win win)
{
  WL_RMA_BEGIN();
  int code = lock_type == MPI_LOCK_EXCLUSIVE ? WL_WIN_LOCK : WL_WIN_LOCK_SHARED;
  wl_mv2_pre(code, win, rank, 0.0);
  int rc = PMPI_Win_lock(lock_type, rank, assert_, win);
  if (rc == MPI_SUCCESS)
    wl_mv2_post(code, win, rank, MPI_GROUP_NULL, 0.0);
  if (rc == MPI_SUCCESS)
    wl_rma(code, win, rank, 0.0, 0.0, t0_, ra_);
  return rc;
}

int MPI_Win_unlock(int rank, MPI_Win win)
{
  WL_RMA_BEGIN();
  wl_mv2_pre(WL_WIN_UNLOCK, win, rank, 0.0);
  int rc = PMPI_Win_unlock(rank, win);
  if (rc == MPI_SUCCESS)
    wl_mv2_post(WL_WIN_UNLOCK, win, rank, MPI_GROUP_NULL, 0.0);
  if (rc == MPI_SUCCESS)
    wl_rma(WL_WIN_UNLOCK, win, rank, 0.0, 0.0, t0_, ra_);
  return rc;
}

int MPI_Win_lock_all(int assert_, MPI_Win win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Win_lock_all(assert_, win);
  if (rc == MPI_SUCCESS)
    wl_rma(WL_WIN_LOCK_ALL, win, -1, 0.0, 0.0, t0_, ra_);
  return rc;
}

int MPI_Win_unlock_all(MPI_Win win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Win_unlock_all(win);
  if (rc == MPI_SUCCESS)
    wl_rma(WL_WIN_UNLOCK_ALL, win, -1, 0.0, 0.0, t0_, ra_);
  return rc;
}

#define WL_RMA_FLUSH(NAME, PNAME, CODE)                                                                                \
  int NAME(int rank, MPI_Win win)                                                                                      \
  {                                                                                                                    \
    WL_RMA_BEGIN();                                                                                                    \
    int rc = PNAME(rank, win);                                                                                         \
    if (rc == MPI_SUCCESS)                                                                                             \
      wl_rma(CODE, win, rank, 0.0, 0.0, t0_, ra_);                                                                     \
    return rc;                                                                                                         \
  }
WL_RMA_FLUSH(MPI_Win_flush, PMPI_Win_flush, WL_WIN_FLUSH)
WL_RMA_FLUSH(MPI_Win_flush_local, PMPI_Win_flush_local, WL_WIN_FLUSH_LOCAL)

#define WL_RMA_FLUSH_ALL(NAME, PNAME, CODE)                                                                            \
  int NAME(MPI_Win win)                                                                                                \
  {                                                                                                                    \
    WL_RMA_BEGIN();                                                                                                    \
    int rc = PNAME(win);                                                                                               \
    if (rc == MPI_SUCCESS)                                                                                             \
      wl_rma(CODE, win, -1, 0.0, 0.0, t0_, ra_);                                                                       \
    return rc;                                                                                                         \
  }
WL_RMA_FLUSH_ALL(MPI_Win_flush_all, PMPI_Win_flush_all, WL_WIN_FLUSH)
WL_RMA_FLUSH_ALL(MPI_Win_flush_local_all, PMPI_Win_flush_local_all, WL_WIN_FLUSH_LOCAL)

/* ---- communication -------------------------------------------------------------------------------------------- */

int MPI_Put(const void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount,
            MPI_Datatype ttype, MPI_Win win)
{
  WL_RMA_BEGIN();
  wl_mv2_pre(WL_PUT, win, target, wl_bytes(ocount, otype));
  int rc = PMPI_Put(oaddr, ocount, otype, target, tdisp, tcount, ttype, win);
  if (rc == MPI_SUCCESS)
    wl_mv2_post(WL_PUT, win, target, MPI_GROUP_NULL, wl_bytes(ocount, otype));
  if (rc == MPI_SUCCESS && target != MPI_PROC_NULL)
    wl_rma(WL_PUT, win, target, wl_bytes(ocount, otype), 0.0, t0_, ra_);
  return rc;
}

int MPI_Get(void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount, MPI_Datatype ttype,
            MPI_Win win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Get(oaddr, ocount, otype, target, tdisp, tcount, ttype, win);
  if (rc == MPI_SUCCESS && target != MPI_PROC_NULL)
    wl_rma(WL_GET, win, target, wl_bytes(ocount, otype), 0.0, t0_, ra_);
  return rc;
}

int MPI_Accumulate(const void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount,
                   MPI_Datatype ttype, MPI_Op op, MPI_Win win)
{
  WL_RMA_BEGIN();
  wl_mv2_pre(WL_ACCUMULATE, win, target, wl_bytes(ocount, otype));
  int rc = PMPI_Accumulate(oaddr, ocount, otype, target, tdisp, tcount, ttype, op, win);
  if (rc == MPI_SUCCESS)
    wl_mv2_post(WL_ACCUMULATE, win, target, MPI_GROUP_NULL, wl_bytes(ocount, otype));
  if (rc == MPI_SUCCESS && target != MPI_PROC_NULL)
    wl_rma(WL_ACCUMULATE, win, target, wl_bytes(ocount, otype), 0.0, t0_, ra_);
  return rc;
}

/* Get-accumulate, fetch-and-op, compare-and-swap and the request-based operations. */
#include "waitlab_pmpi_rma_ops.c"

/* Fortran bindings of the same calls. */
#include "waitlab_pmpi_rma_f.c"
