/* waitlab measurement layer for real MPI programs run under SimGrid SMPI.
 *
 * Compiled once with smpicc into an object and linked statically into the
 * user's program (a PMPI layer in a shared library or LD_PRELOAD is bypassed by
 * SMPI's RTLD_DEEPBIND loading).  Runs with SMPI privatization (smpirun without
 * -no-privatize): every rank has its own copy of this file's static state.
 *
 * For every MPI call it records, in simulated time (simgrid_get_clock), one
 * 24-byte log record {int32 rank, int32 action code, float64 enter, float64 exit}
 * (the format of the replay extension's log) and one 48-byte argument record
 * {int32 peer, tag, name, comm, step, flags; float64 value, value2; uint64 site}:
 * peer/root as MPI_COMM_WORLD ranks, bytes, region name id, communicator id,
 * and the call site (return address relative to the program's load address).
 * Region markers (waitlab.h) are records too.  Action codes are the WL_*
 * constants of waitlab_actions.h, generated from waitlab.models.vocabulary.
 * Polls (MPI_Test* that complete nothing, MPI_Request_get_status, MPI_Iprobe, MPI_Probe) are held back until the
 * next call (waitlab_pmpi_poll.c): the call right after them that completes or receives what they polled for
 * enters when the first poll did; otherwise they become one `test` record of their own (MPI time).
 *
 * Injection schedule (WAITLAB_SCHEDULE=<dir>, file s<rank>.bin, 32-byte records
 * {int64 anchor, int32 code, int32 phase, float64 value, float64 value2}, in
 * execution order): phase 0 items run just before the anchor-th recorded MPI
 * call or region marker of the rank (anchors are counted from 0; past the end =
 * at MPI_Finalize), phase 1 items right after the (anchor-1)-th one returns (or
 * after MPI_Init for anchor 0), i.e. before the program's own computation.  The
 * layer executes each item: overhead/noise/compute are CPU-bound
 * (smpi_execute_benched), delay/swap/sleep sleep, flush sleeps value/value2 s.
 * Each executed item is recorded with flags bit 0 set.
 *
 * With WAITLAB_COUNTED=<flops per block> (computation = "counted", the program compiled with
 * -fsanitize-coverage=trace-pc) every basic block of the program's code calls __sanitizer_cov_trace_pc, which counts
 * it; every wrapper (and MPI_Wtime) first executes the blocks counted since the last charge times that many flops
 * (smpi_execute_flops), so the program's computation costs the same simulated time run after run.
 *
 * With WAITLAB_MEASURED=1 (computation = "measured") every wrapper first lets SMPI charge the program's computation
 * since the last call (smpi_bench_end/begin), so the clock read at entry books it as compute, not inside the call.
 *
 * Output (WAITLAB_OUT=<dir>), written at MPI_Finalize: r<rank>.log, r<rank>.arg,
 * r<rank>.names ("id<TAB>name"), r<rank>.vec (per-peer byte counts of v-collectives:
 * "op_index n s_0..s_n-1 r_0..r_n-1"), r<rank>.fix (ANY_SOURCE/ANY_TAG receives
 * resolved at completion: "op_index peer tag"), r<rank>.comms ("id world ranks..."
 * of non-world communicators), r<rank>.nbc (the post of each completed nonblocking collective: "serial t_enter
 * t_exit"; its completion record has tag = serial) and last r<rank>.done ("records <n>").
 * While the program runs, WAITLAB_OUT/count holds each rank's number of records so far and the simulated time of its
 * last one (an int64 and a double per rank, rank r at byte 16 r, a shared mapping updated at every record): waitlab
 * reports the run's progress from it and makes ready the memory it needs once the run ends (simulator/progress.py,
 * simulator/heap.py).  Outside the simulation: nothing it does changes a simulated time.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <mpi.h>
#include <simgrid/actor.h>
#include <simgrid/engine.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Action codes (WL_*): generated from waitlab.models.vocabulary. */
#include "waitlab_actions.h"

#define WL_FLAG_INJECTED 1 /* executed from the injection schedule */
#define WL_FLAG_CAUSE 2    /* a known delay the program injected itself (WAITLAB_INJECT): a row of the cause ledger */

typedef struct {
  int32_t rank, code;
  double t_enter, t_exit;
} wl_log_t;

typedef struct {
  int32_t peer, tag, name, comm, step, flags;
  double value, value2;
  uint64_t site;
} wl_arg_t;

typedef struct {
  int64_t anchor;
  int32_t code, phase; /* phase 0: before anchor `anchor`; 1: right after anchor `anchor - 1` (or MPI_Init) */
  double value, value2;
} wl_item_t;

/* A pending request: a point-to-point one (op = its isend/irecv record) or a nonblocking collective (coll = the
 * action code of its blocking twin, recorded when the request completes, as Scalasca books it). */
typedef struct {
  uintptr_t key; /* 0: free slot; WL_TOMB: deleted */
  int64_t op;    /* index of the isend/irecv record, -1 for a nonblocking collective */
  int32_t peer, tag, is_recv, unresolved;
  int32_t coll, cid; /* nonblocking collective: action code and communicator id; else -1 */
  MPI_Comm comm;
  double value, value2;
  int64_t serial;         /* nonblocking collective: the rank's request serial (1, 2, ...) */
  double t_post0, t_post1; /* nonblocking collective: its post call (MPI_I<collective>) */
  long long* vec;          /* nonblocking reduce-scatter: bytes each member receives (n_vec of them, heap), else NULL */
  int n_vec;
} wl_req_t;

/* A persistent request's template (MPI_Send_init, ..., MPI_Recv_init): started by MPI_Start(all). */
typedef struct {
  uintptr_t key;
  int32_t code, peer, tag, unresolved;
  MPI_Comm comm;
  double bytes;
} wl_persist_t;

#define WL_TOMB ((uintptr_t)1 << (sizeof(uintptr_t) * 8 - 1))

_Static_assert(sizeof(wl_log_t) == 24, "log record must be 24 bytes");
_Static_assert(sizeof(wl_arg_t) == 48, "argument record must be 48 bytes");
_Static_assert(sizeof(wl_item_t) == 32, "schedule record must be 32 bytes");

/* Per-rank state (privatized by SMPI). */
static int wl_on = 0;
static int wl_rank = -1;
static int wl_size = 0;
static int wl_step = -1;
static int wl_measured = 0; /* WAITLAB_MEASURED=1: SMPI benchmarks the program's computation */
static int wl_rerun = 0; /* run with an injection schedule: WAITLAB_INJECT's delays come from the schedule */
static char* wl_base = NULL;
static wl_log_t* wl_logs = NULL;
static wl_arg_t* wl_args = NULL;
static int64_t wl_n = 0, wl_cap = 0;
static int64_t wl_anchor = 0;
static wl_item_t* wl_items = NULL;
static int64_t wl_n_items = 0, wl_next_item = 0;
static wl_req_t* wl_reqs = NULL; /* open-addressing hash table of pending requests, by handle */
static int64_t wl_n_reqs = 0, wl_used_reqs = 0, wl_cap_reqs = 0;
static wl_persist_t* wl_persist = NULL;
static int64_t wl_n_persist = 0, wl_cap_persist = 0;
static uint64_t wl_blocks = 0, wl_blocks_charged = 0; /* computation = "counted": basic blocks executed, charged */
static double wl_flops_per_block = 0.0;                 /* WAITLAB_COUNTED; 0: not counted */
static long long wl_wtime_spin = 0;
static double wl_wtime_last = -1.0;
static char** wl_names = NULL;
static int wl_n_names = 0, wl_cap_names = 0;
static char* wl_vec = NULL; /* text buffers */
static size_t wl_vec_len = 0, wl_vec_cap = 0;
static char* wl_fix = NULL;
static size_t wl_fix_len = 0, wl_fix_cap = 0;
static char* wl_nbc = NULL; /* posts of completed nonblocking collectives: "serial t_post0 t_post1" */
static size_t wl_nbc_len = 0, wl_nbc_cap = 0;
static int64_t wl_nbc_serial = 0;
static char* wl_comms = NULL;
static size_t wl_comms_len = 0, wl_comms_cap = 0;
static int wl_n_comms = 0;
static int** wl_comm_members = NULL;
static int* wl_comm_sizes = NULL;
typedef struct {
  int64_t records;
  double clock; /* simulated time of the last record's exit */
} wl_count_t;
_Static_assert(sizeof(wl_count_t) == 16, "count slot must be 16 bytes");
static volatile wl_count_t* wl_count = NULL; /* this rank's slot of WAITLAB_OUT/count (NULL: none) */

/* The MPI call the rank is in (issue 22): set on entry by WL_BEGIN (the wrapper's name and return address; kind 0)
 * and by WL_IN in the wrappers of blocking calls that address a peer or root, cleared by the call's record.  A rank
 * SimGrid kills inside a call (a deadlock) reports it from its on-exit hook (wl_report_inside, waitlab_pmpi_abort.c). */
#define WL_IN_FROM 1 /* peer: the source of a receive */
#define WL_IN_TO 2   /* peer: the destination of a send */
#define WL_IN_BOTH 3 /* a sendrecv: peer the source, peer2 the destination */
#define WL_IN_ROOT 4 /* peer: the root of a rooted collective */
typedef struct {
  const char* call; /* NULL: not inside a recorded call */
  const void* ra;
  int kind, peer, peer2, tag;
  MPI_Comm comm;
} wl_in_t;
static wl_in_t wl_in = {NULL, NULL, 0, 0, 0, 0, MPI_COMM_NULL};
#define WL_IN(KIND, PEER, PEER2, TAG, COMM)                                                                            \
  do {                                                                                                                 \
    wl_in.kind = (KIND);                                                                                               \
    wl_in.peer = (PEER);                                                                                               \
    wl_in.peer2 = (PEER2);                                                                                             \
    wl_in.tag = (TAG);                                                                                                 \
    wl_in.comm = (COMM);                                                                                               \
  } while (0)

static void wl_die(const char* what)
{
  fprintf(stderr, "waitlab measurement layer (rank %d): %s\n", wl_rank, what);
  abort();
}

static void* wl_malloc(size_t n)
{
  void* p = malloc(n ? n : 1);
  if (p == NULL)
    wl_die("out of memory");
  return p;
}

static void* wl_grow(void* p, int64_t* cap, int64_t need, size_t elem)
{
  if (need <= *cap)
    return p;
  int64_t c = *cap ? *cap : 1024;
  while (c < need)
    c *= 2;
  void* q = realloc(p, (size_t)c * elem);
  if (q == NULL)
    wl_die("out of memory for the event buffer");
  *cap = c;
  return q;
}

static void wl_text(char** buf, size_t* len, size_t* cap, const char* fmt, ...) __attribute__((format(printf, 4, 5)));
static void wl_text(char** buf, size_t* len, size_t* cap, const char* fmt, ...)
{
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = *cap - *len;
    int n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? room : 0, fmt, ap);
    va_end(ap);
    if (n < 0)
      wl_die("cannot format a record");
    if (*buf && (size_t)n < room) {
      *len += (size_t)n;
      return;
    }
    size_t c = *cap ? *cap : 4096;
    while (c < *len + (size_t)n + 1)
      c *= 2;
    char* q = realloc(*buf, c);
    if (q == NULL)
      wl_die("out of memory");
    *buf = q;
    *cap = c;
  }
}

static inline double wl_now(void) { return simgrid_get_clock(); }

static inline uint64_t wl_site(const void* ra) { return (uint64_t)((const char*)ra - wl_base); }

static void wl_post_hook(void);

static int64_t wl_push(int code, double t0, double t1, int peer, int tag, int comm, double value, double value2,
                       int name, uint64_t site, int flags)
{
  if (wl_n + 1 > wl_cap) {
    int64_t c1 = wl_cap, c2 = wl_cap;
    wl_logs = wl_grow(wl_logs, &c1, wl_n + 1, sizeof(wl_log_t));
    wl_args = wl_grow(wl_args, &c2, wl_n + 1, sizeof(wl_arg_t));
    wl_cap = c1;
  }
  wl_log_t* l = &wl_logs[wl_n];
  l->rank = wl_rank;
  l->code = code;
  l->t_enter = t0;
  l->t_exit = t1;
  wl_arg_t* a = &wl_args[wl_n];
  a->peer = peer;
  a->tag = tag;
  a->name = name;
  a->comm = comm;
  a->step = wl_step;
  a->flags = flags;
  a->value = value;
  a->value2 = value2;
  a->site = site;
  int64_t idx = wl_n++;
  wl_in.call = NULL;
  if (wl_count != NULL) {
    wl_count->records = wl_n;
    wl_count->clock = t1;
  }
  wl_wtime_spin = 0;
  if (!(flags & (WL_FLAG_INJECTED | WL_FLAG_CAUSE)) && code != WL_INIT && code != WL_FINALIZE) {
    wl_anchor++;
    wl_post_hook();
  }
  return idx;
}

/* ---- computation = "counted" ------------------------------------------------------------------------------------ */

/* Called by the compiler at every basic block of code built with -fsanitize-coverage=trace-pc (the program's, not
 * this layer's nor SimGrid's).  The counter is per rank: SMPI privatizes this file's static data. */
void __sanitizer_cov_trace_pc(void) { wl_blocks++; }

/* Execute the program's computation counted since the last charge (before a call's clock read). */
static void wl_charge_counted(void)
{
  if (wl_flops_per_block > 0 && wl_blocks != wl_blocks_charged) {
    double flops = (double)(wl_blocks - wl_blocks_charged) * wl_flops_per_block;
    wl_blocks_charged = wl_blocks;
    smpi_execute_flops(flops);
  }
}

/* ---- injection schedule --------------------------------------------------------------------------------------- */

static void wl_sleep(double s)
{
  if (s <= 0)
    return;
  smpi_bench_end();
  sg_actor_sleep_for(s);
  smpi_bench_begin();
}

static void wl_run_items(int64_t upto_anchor, int post)
{
  while (wl_next_item < wl_n_items && wl_items[wl_next_item].anchor <= upto_anchor &&
         (!post || (wl_items[wl_next_item].phase == 1 && wl_items[wl_next_item].anchor == upto_anchor))) {
    const wl_item_t* it = &wl_items[wl_next_item++];
    double t0 = wl_now();
    switch (it->code) {
      case WL_OVERHEAD:
      case WL_NOISE:
      case WL_COMPUTE:
        if (it->value > 0)
          smpi_execute_benched(it->value);
        break;
      case WL_DELAY:
      case WL_SWAP:
      case WL_SLEEP:
        wl_sleep(it->value);
        break;
      case WL_FLUSH:
        if (it->value2 <= 0)
          wl_die("flush rate must be > 0 in the injection schedule");
        wl_sleep(it->value / it->value2);
        break;
      default:
        wl_die("unknown action code in the injection schedule");
    }
    wl_push(it->code, t0, wl_now(), -1, 0, 0, it->value, it->value2, -1, 0, WL_FLAG_INJECTED);
  }
}

/* Items that follow the anchor just recorded, before the program computes again. */
static void wl_post_hook(void)
{
  if (wl_next_item < wl_n_items && wl_items[wl_next_item].phase == 1 && wl_items[wl_next_item].anchor == wl_anchor)
    wl_run_items(wl_anchor, 1);
}

static void wl_poll_flush(void); /* waitlab_pmpi_poll.c: writes a pending run of failed polls as a record */

/* Whether injected items are due before the next anchor (phase 0). */
static int wl_items_due(void) { return wl_next_item < wl_n_items && wl_items[wl_next_item].anchor <= wl_anchor; }

/* The injected items due before the next anchor. */
#define WL_RUN_ITEMS()                                                                                                 \
  do {                                                                                                                 \
    if (wl_next_item < wl_n_items)                                                                                     \
      wl_run_items(wl_anchor, 0);                                                                                      \
  } while (0)

/* Before a recorded call or region marker: a pending run of failed polls is recorded first (it is the anchor before
 * this one), then the injected items due before this anchor run. */
#define WL_PRE()                                                                                                       \
  do {                                                                                                                 \
    wl_poll_flush();                                                                                                   \
    WL_RUN_ITEMS();                                                                                                    \
  } while (0)

static void wl_load_schedule(void)
{
  const char* dir = getenv("WAITLAB_SCHEDULE");
  if (dir == NULL || *dir == '\0')
    return;
  wl_rerun = 1;
  char path[4096];
  if (snprintf(path, sizeof path, "%s/s%d.bin", dir, wl_rank) >= (int)sizeof path)
    wl_die("the path of WAITLAB_SCHEDULE is too long (over 4095 bytes)");
  FILE* f = fopen(path, "rb");
  if (f == NULL)
    return; /* no injections for this rank */
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (bytes < 0 || bytes % (long)sizeof(wl_item_t) != 0)
    wl_die("malformed injection schedule file");
  wl_n_items = bytes / (long)sizeof(wl_item_t);
  wl_items = malloc((size_t)bytes + 1);
  if (wl_items == NULL || (wl_n_items && fread(wl_items, sizeof(wl_item_t), (size_t)wl_n_items, f) != (size_t)wl_n_items))
    wl_die("cannot read the injection schedule");
  fclose(f);
}

/* ---- the rest of the layer, one translation unit ---------------------------------------------------------------- */

#include "waitlab_pmpi_count.c"
#include "waitlab_pmpi_comms.c"
#include "waitlab_pmpi_poll.c"
#include "waitlab_pmpi_p2p.c"
#include "waitlab_pmpi_coll.c"
#include "waitlab_pmpi_f.c"

/* ---- generated wrappers: sends, scalar collectives (blocking and nonblocking), C and Fortran ------------------ */

#include "waitlab_wrappers.inc"

/* One-sided communication (RMA): its own file, same translation unit. */
#include "waitlab_pmpi_rma.c"

/* MPI_Abort names its rank, error code and simulated time (issue 23): its own file, same translation unit. */
#include "waitlab_pmpi_abort.c"
