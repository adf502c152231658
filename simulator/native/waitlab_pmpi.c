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
 * With WAITLAB_MEASURED=1 (computation = "measured") every wrapper first lets SMPI charge the program's computation
 * since the last call (smpi_bench_end/begin), so the clock read at entry books it as compute, not inside the call.
 *
 * Output (WAITLAB_OUT=<dir>), written at MPI_Finalize: r<rank>.log, r<rank>.arg,
 * r<rank>.names ("id<TAB>name"), r<rank>.vec (per-peer byte counts of v-collectives:
 * "op_index n s_0..s_n-1 r_0..r_n-1"), r<rank>.fix (ANY_SOURCE/ANY_TAG receives
 * resolved at completion: "op_index peer tag"), r<rank>.comms ("id world ranks..."
 * of non-world communicators) and last r<rank>.done ("records <n>").
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <simgrid/actor.h>
#include <simgrid/engine.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static long long wl_wtime_spin = 0;
static double wl_wtime_last = -1.0;
static char** wl_names = NULL;
static int wl_n_names = 0, wl_cap_names = 0;
static char* wl_vec = NULL; /* text buffers */
static size_t wl_vec_len = 0, wl_vec_cap = 0;
static char* wl_fix = NULL;
static size_t wl_fix_len = 0, wl_fix_cap = 0;
static char* wl_comms = NULL;
static size_t wl_comms_len = 0, wl_comms_cap = 0;
static int wl_n_comms = 0;
static int** wl_comm_members = NULL;
static int* wl_comm_sizes = NULL;

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
  wl_wtime_spin = 0;
  if (!(flags & (WL_FLAG_INJECTED | WL_FLAG_CAUSE)) && code != WL_INIT && code != WL_FINALIZE) {
    wl_anchor++;
    wl_post_hook();
  }
  return idx;
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

#define WL_PRE()                                                                                                       \
  do {                                                                                                                 \
    if (wl_next_item < wl_n_items)                                                                                     \
      wl_run_items(wl_anchor, 0);                                                                                      \
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

/* ---- communicators, requests, names -------------------------------------------------------------------------- */

/* Translate a rank of comm to its MPI_COMM_WORLD rank. */
static int wl_world(MPI_Comm comm, int r)
{
  if (comm == MPI_COMM_WORLD || r < 0)
    return r;
  MPI_Group g, w;
  int out = r;
  PMPI_Comm_group(comm, &g);
  PMPI_Comm_group(MPI_COMM_WORLD, &w);
  PMPI_Group_translate_ranks(g, 1, &r, w, &out);
  PMPI_Group_free(&g);
  PMPI_Group_free(&w);
  return out;
}

/* 0 for MPI_COMM_WORLD (or a communicator with the same ranks in the same order), else a per-rank id >= 1
 * whose member list is written to r<rank>.comms. */
static int wl_comm_id(MPI_Comm comm)
{
  if (comm == MPI_COMM_WORLD)
    return 0;
  int size;
  PMPI_Comm_size(comm, &size);
  int* members = wl_malloc(sizeof(int) * (size_t)size);
  int* idx = wl_malloc(sizeof(int) * (size_t)size);
  MPI_Group g, w;
  PMPI_Comm_group(comm, &g);
  PMPI_Comm_group(MPI_COMM_WORLD, &w);
  for (int i = 0; i < size; i++)
    idx[i] = i;
  PMPI_Group_translate_ranks(g, size, idx, w, members);
  PMPI_Group_free(&g);
  PMPI_Group_free(&w);
  free(idx);
  int identity = size == wl_size;
  for (int i = 0; identity && i < size; i++)
    identity = members[i] == i;
  if (identity) {
    free(members);
    return 0;
  }
  for (int c = 0; c < wl_n_comms; c++) {
    if (wl_comm_sizes[c] == size && memcmp(wl_comm_members[c], members, sizeof(int) * (size_t)size) == 0) {
      free(members);
      return c + 1;
    }
  }
  wl_comm_members = realloc(wl_comm_members, sizeof(int*) * (size_t)(wl_n_comms + 1));
  wl_comm_sizes = realloc(wl_comm_sizes, sizeof(int) * (size_t)(wl_n_comms + 1));
  if (wl_comm_members == NULL || wl_comm_sizes == NULL)
    wl_die("out of memory");
  wl_comm_members[wl_n_comms] = members;
  wl_comm_sizes[wl_n_comms] = size;
  wl_n_comms++;
  wl_text(&wl_comms, &wl_comms_len, &wl_comms_cap, "%d", wl_n_comms);
  for (int i = 0; i < size; i++)
    wl_text(&wl_comms, &wl_comms_len, &wl_comms_cap, " %d", members[i]);
  wl_text(&wl_comms, &wl_comms_len, &wl_comms_cap, "\n");
  return wl_n_comms;
}

static int wl_root(MPI_Comm comm, int root) { return wl_world(comm, root); }

static double wl_bytes(int count, MPI_Datatype dt)
{
  if (dt == MPI_DATATYPE_NULL || count <= 0)
    return 0.0;
  int size = 0;
  PMPI_Type_size(dt, &size);
  return (double)count * (double)size;
}

static uint64_t wl_hash(uintptr_t key)
{
  uint64_t h = (uint64_t)key * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 29);
}

static void wl_req_insert(const wl_req_t* r);

static void wl_req_rehash(int64_t cap)
{
  wl_req_t* old = wl_reqs;
  int64_t old_cap = wl_cap_reqs;
  wl_reqs = calloc((size_t)cap, sizeof(wl_req_t));
  if (wl_reqs == NULL)
    wl_die("out of memory for the request table");
  wl_cap_reqs = cap;
  wl_n_reqs = wl_used_reqs = 0;
  for (int64_t i = 0; i < old_cap; i++)
    if (old[i].key != 0 && old[i].key != WL_TOMB)
      wl_req_insert(&old[i]);
  free(old);
}

static void wl_req_insert(const wl_req_t* r)
{
  if (2 * (wl_used_reqs + 1) > wl_cap_reqs)
    wl_req_rehash(wl_cap_reqs ? (wl_n_reqs * 4 > wl_cap_reqs ? 2 * wl_cap_reqs : wl_cap_reqs) : 256);
  uint64_t mask = (uint64_t)wl_cap_reqs - 1;
  for (uint64_t i = wl_hash(r->key) & mask;; i = (i + 1) & mask) {
    if (wl_reqs[i].key == 0 || wl_reqs[i].key == WL_TOMB) {
      if (wl_reqs[i].key == 0)
        wl_used_reqs++;
      wl_reqs[i] = *r;
      wl_n_reqs++;
      return;
    }
  }
}

static void wl_req_add(uintptr_t key, int64_t op, int peer, int tag, int is_recv, int unresolved, MPI_Comm comm)
{
  if (key == 0)
    return;
  wl_req_t r = {key, op, peer, tag, is_recv, unresolved, -1, -1, comm, 0.0, 0.0};
  wl_req_insert(&r);
}

/* A nonblocking collective: recorded as its blocking twin `code` when it completes. */
static void wl_coll_add(uintptr_t key, int code, int root, int cid, double value, double value2)
{
  if (key == 0)
    return;
  wl_req_t r = {key, -1, root, 0, 0, 0, code, cid, MPI_COMM_NULL, value, value2};
  wl_req_insert(&r);
}

/* Remove and return the pending request with this key (0 if unknown): O(1). */
static int wl_req_take(uintptr_t key, wl_req_t* out)
{
  if (key == 0 || wl_cap_reqs == 0)
    return 0;
  uint64_t mask = (uint64_t)wl_cap_reqs - 1;
  for (uint64_t i = wl_hash(key) & mask; wl_reqs[i].key != 0; i = (i + 1) & mask) {
    if (wl_reqs[i].key == key) {
      *out = wl_reqs[i];
      wl_reqs[i].key = WL_TOMB;
      wl_n_reqs--;
      return 1;
    }
  }
  return 0;
}

static wl_persist_t* wl_persist_find(uintptr_t key)
{
  for (int64_t i = wl_n_persist - 1; i >= 0; i--)
    if (wl_persist[i].key == key)
      return &wl_persist[i];
  return NULL;
}

/* A completed receive: the bytes actually received (a 0-byte message is 0, not the posted size). */
static void wl_received(const wl_req_t* r, const MPI_Status* st)
{
  if (r->is_recv && r->op >= 0 && st != NULL) {
    int got = 0;
    if (PMPI_Get_count(st, MPI_BYTE, &got) == MPI_SUCCESS && got != MPI_UNDEFINED && got >= 0)
      wl_args[r->op].value = (double)got;
  }
}

/* A receive whose source or tag was a wildcard: record the actual ones. */
static void wl_resolve(wl_req_t* r, const MPI_Status* st, MPI_Comm comm)
{
  wl_received(r, st);
  if (!r->is_recv || !r->unresolved || st == NULL)
    return;
  r->peer = wl_world(r->comm != MPI_COMM_NULL ? r->comm : comm, st->MPI_SOURCE);
  r->tag = st->MPI_TAG;
  wl_args[r->op].peer = r->peer;
  wl_args[r->op].tag = r->tag;
  wl_text(&wl_fix, &wl_fix_len, &wl_fix_cap, "%lld %d %d\n", (long long)r->op, r->peer, r->tag);
  r->unresolved = 0;
}

static void wl_record_completion(int found, wl_req_t* r, double t0, double t1, uint64_t site)
{
  if (found && r->coll >= 0) /* a nonblocking collective: its wait is the collective's (Scalasca) */
    wl_push(r->coll, t0, t1, r->peer, 0, r->cid, r->value, r->value2, -1, site, 0);
  else if (found)
    wl_push(WL_WAIT, t0, t1, r->peer, r->tag, 0, 0.0, r->is_recv ? 1.0 : 0.0, -1, site, 0);
  else /* a request waitlab does not track (persistent, collective, null): kept as a 'test' */
    wl_push(WL_TEST, t0, t1, -1, 0, 0, 0.0, 0.0, -1, site, 0);
}

static int wl_name_id(const char* name)
{
  for (int i = 0; i < wl_n_names; i++)
    if (strcmp(wl_names[i], name) == 0)
      return i;
  if (wl_n_names == wl_cap_names) {
    wl_cap_names = wl_cap_names ? 2 * wl_cap_names : 64;
    wl_names = realloc(wl_names, sizeof(char*) * (size_t)wl_cap_names);
    if (wl_names == NULL)
      wl_die("out of memory");
  }
  size_t n = strlen(name);
  char* copy = malloc(n + 2);
  if (copy == NULL)
    wl_die("out of memory");
  if (n == 0) {
    strcpy(copy, "_");
  } else {
    for (size_t i = 0; i < n; i++) {
      unsigned char ch = (unsigned char)name[i];
      copy[i] = (ch <= ' ' || ch == 127) ? '_' : (char)ch;
    }
    copy[n] = '\0';
    if (copy[0] == '@')
      copy[0] = '_';
  }
  for (int i = 0; i < wl_n_names; i++)
    if (strcmp(wl_names[i], copy) == 0) {
      free(copy);
      return i;
    }
  wl_names[wl_n_names] = copy;
  return wl_n_names++;
}

/* ---- start and end -------------------------------------------------------------------------------------------- */

static void wl_start(double t0, double t1, const void* ra)
{
  PMPI_Comm_rank(MPI_COMM_WORLD, &wl_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &wl_size);
  Dl_info info;
  if (dladdr((void*)&wl_start, &info) && info.dli_fbase)
    wl_base = (char*)info.dli_fbase;
  wl_load_schedule();
  const char* measured = getenv("WAITLAB_MEASURED");
  wl_measured = measured != NULL && strcmp(measured, "1") == 0;
  wl_on = 1;
  wl_push(WL_INIT, t0, t1, -1, 0, 0, 0.0, 0.0, -1, wl_site(ra), 0);
  wl_post_hook();
}

static void wl_write(const char* dir, const char* stem, const char* suffix, const void* data, size_t size)
{
  char path[4096];
  if (snprintf(path, sizeof path, "%s/%s%d.%s", dir, stem, wl_rank, suffix) >= (int)sizeof path)
    wl_die("the path of WAITLAB_OUT is too long (over 4095 bytes)");
  FILE* f = fopen(path, "wb");
  if (f == NULL || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
    fprintf(stderr, "waitlab measurement layer (rank %d): cannot write %s\n", wl_rank, path);
    abort();
  }
}

static void wl_finish(double t0, double t1, const void* ra)
{
  wl_push(WL_FINALIZE, t0, t1, -1, 0, 0, 0.0, 0.0, -1, wl_site(ra), 0);
  wl_on = 0;
  const char* dir = getenv("WAITLAB_OUT");
  if (dir == NULL || *dir == '\0')
    return; /* linked with the layer but not run by waitlab: record nothing */
  wl_write(dir, "r", "log", wl_logs, sizeof(wl_log_t) * (size_t)wl_n);
  wl_write(dir, "r", "arg", wl_args, sizeof(wl_arg_t) * (size_t)wl_n);
  char* names = NULL;
  size_t len = 0, cap = 0;
  wl_text(&names, &len, &cap, "%s", "");
  for (int i = 0; i < wl_n_names; i++)
    wl_text(&names, &len, &cap, "%d\t%s\n", i, wl_names[i]);
  wl_write(dir, "r", "names", names, len);
  free(names);
  wl_write(dir, "r", "vec", wl_vec, wl_vec_len);
  wl_write(dir, "r", "fix", wl_fix, wl_fix_len);
  wl_write(dir, "r", "comms", wl_comms, wl_comms_len);
  char done[64];
  int n = snprintf(done, sizeof done, "records %lld\n", (long long)wl_n);
  wl_write(dir, "r", "done", done, (size_t)n);
}

/* ---- region markers (waitlab.h) ------------------------------------------------------------------------------- */

void waitlab_region_begin(const char* name)
{
  if (!wl_on)
    return;
  if (wl_measured) { /* computation = "measured": book the computation before the marker */
    smpi_bench_end();
    smpi_bench_begin();
  }
  WL_PRE();
  double t = wl_now();
  wl_push(WL_ENTER, t, t, -1, 0, 0, 0.0, 0.0, wl_name_id(name ? name : ""), wl_site(__builtin_return_address(0)), 0);
}

void waitlab_region_end(const char* name)
{
  if (!wl_on)
    return;
  if (wl_measured) {
    smpi_bench_end();
    smpi_bench_begin();
  }
  WL_PRE();
  double t = wl_now();
  wl_push(WL_LEAVE, t, t, -1, 0, 0, 0.0, 0.0, wl_name_id(name ? name : ""), wl_site(__builtin_return_address(0)), 0);
}

void waitlab_set_step(int step) { wl_step = step; }

/* WAITLAB_INJECT(region, seconds): `seconds` of CPU-bound work inside user region `region`, recorded as a cause
 * (imbalance) of the ground-truth ledger.  In a re-run with an injection schedule (a counterfactual, a perturbed
 * run) the schedule executes what the target operations say instead (the cause may have been removed). */
void waitlab_inject(const char* name, double seconds)
{
  if (!wl_on || !(seconds > 0))
    return;
  waitlab_region_begin(name);
  if (!wl_rerun) {
    int id = wl_name_id(name ? name : "");
    double t0 = wl_now();
    smpi_execute_benched(seconds);
    wl_push(WL_COMPUTE, t0, wl_now(), -1, 0, 0, seconds, 0.0, id, wl_site(__builtin_return_address(0)),
            WL_FLAG_CAUSE);
  }
  waitlab_region_end(name);
}

static char* wl_fstring(const char* s, size_t len)
{
  while (len > 0 && s[len - 1] == ' ')
    len--;
  char* c = malloc(len + 1);
  if (c == NULL)
    wl_die("out of memory");
  memcpy(c, s, len);
  c[len] = '\0';
  return c;
}

void waitlab_region_begin_(const char* name, size_t len)
{
  char* c = wl_fstring(name, len);
  waitlab_region_begin(c);
  free(c);
}

void waitlab_region_end_(const char* name, size_t len)
{
  char* c = wl_fstring(name, len);
  waitlab_region_end(c);
  free(c);
}

void waitlab_set_step_(const int* step) { wl_step = *step; }

void waitlab_inject_(const char* name, const double* seconds, size_t len)
{
  char* c = wl_fstring(name, len);
  waitlab_inject(c, *seconds);
  free(c);
}

/* ---- C bindings ----------------------------------------------------------------------------------------------- */

/* smpi_bench_end() charges the program's computation since the last MPI call (computation = "measured") before the
 * clock is read, so it is booked as compute, not inside this call; smpi_bench_begin() restarts the benchmark. */
#define WL_BEGIN()                                                                                                     \
  const void* ra_ = __builtin_return_address(0);                                                                       \
  if (wl_on) {                                                                                                         \
    if (wl_measured) {                                                                                                 \
      smpi_bench_end();                                                                                                \
      smpi_bench_begin();                                                                                              \
    }                                                                                                                  \
    WL_PRE();                                                                                                          \
  }                                                                                                                    \
  double t0_ = wl_now()

int MPI_Init(int* argc, char*** argv)
{
  double t0 = wl_now();
  int rc = PMPI_Init(argc, argv);
  wl_start(t0, wl_now(), __builtin_return_address(0));
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided)
{
  double t0 = wl_now();
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  wl_start(t0, wl_now(), __builtin_return_address(0));
  return rc;
}

int MPI_Finalize(void)
{
  WL_BEGIN();
  if (wl_on)
    wl_run_items(INT64_MAX, 0);
  int rc = PMPI_Finalize();
  if (wl_on && rc == MPI_SUCCESS)
    wl_finish(t0_, wl_now(), ra_);
  return rc;
}

static int wl_p2p_send(int code, const void* ra, double t0, int count, MPI_Datatype dt, int dst, int tag,
                       MPI_Comm comm)
{
  return (int)wl_push(code, t0, wl_now(), wl_world(comm, dst), tag, wl_comm_id(comm), wl_bytes(count, dt), 0.0, -1,
                      wl_site(ra), 0);
}

int MPI_Recv(void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status* status)
{
  WL_BEGIN();
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Recv(buf, count, dt, src, tag, comm, st);
  if (wl_on && rc == MPI_SUCCESS && src != MPI_PROC_NULL) {
    int got = 0;
    PMPI_Get_count(st, MPI_BYTE, &got);
    wl_push(WL_RECV, t0_, wl_now(), wl_world(comm, st->MPI_SOURCE), st->MPI_TAG, wl_comm_id(comm),
            got != MPI_UNDEFINED && got >= 0 ? (double)got : wl_bytes(count, dt), 0.0, -1, wl_site(ra_), 0);
  }
  return rc;
}

int MPI_Irecv(void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request* req)
{
  WL_BEGIN();
  int rc = PMPI_Irecv(buf, count, dt, src, tag, comm, req);
  if (wl_on && rc == MPI_SUCCESS && src != MPI_PROC_NULL) {
    int peer = src == MPI_ANY_SOURCE ? -1 : wl_world(comm, src);
    int unresolved = src == MPI_ANY_SOURCE || tag == MPI_ANY_TAG;
    int64_t op = wl_push(WL_IRECV, t0_, wl_now(), peer, tag, wl_comm_id(comm), wl_bytes(count, dt), 0.0, -1,
                         wl_site(ra_), 0);
    wl_req_add((uintptr_t)*req, op, peer, tag, 1, unresolved, comm);
  }
  return rc;
}

/* A sendrecv, recorded as isend + irecv + waitall (which is how SMPI runs it); the receive's bytes as received. */
static void wl_sendrecv(double t0, const void* ra, int scount, MPI_Datatype stype, int dst, int stag, int rcount,
                        MPI_Datatype rtype, int src, MPI_Comm comm, MPI_Status* st)
{
  double t1 = wl_now();
  int cid = wl_comm_id(comm);
  uint64_t site = wl_site(ra);
  if (dst != MPI_PROC_NULL)
    wl_push(WL_ISEND, t0, t0, wl_world(comm, dst), stag, cid, wl_bytes(scount, stype), 0.0, -1, site, 0);
  if (src != MPI_PROC_NULL) {
    int got = 0;
    double bytes = PMPI_Get_count(st, MPI_BYTE, &got) == MPI_SUCCESS && got != MPI_UNDEFINED && got >= 0
                       ? (double)got
                       : wl_bytes(rcount, rtype);
    wl_push(WL_IRECV, t0, t0, wl_world(comm, st->MPI_SOURCE), st->MPI_TAG, cid, bytes, 0.0, -1, site, 0);
  }
  wl_push(WL_WAITALL, t0, t1, -1, 0, cid, 0.0, 0.0, -1, site, 0);
}

int MPI_Sendrecv(const void* sbuf, int scount, MPI_Datatype stype, int dst, int stag, void* rbuf, int rcount,
                 MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status* status)
{
  WL_BEGIN();
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Sendrecv(sbuf, scount, stype, dst, stag, rbuf, rcount, rtype, src, rtag, comm, st);
  if (wl_on && rc == MPI_SUCCESS)
    wl_sendrecv(t0_, ra_, scount, stype, dst, stag, rcount, rtype, src, comm, st);
  return rc;
}

int MPI_Wait(MPI_Request* req, MPI_Status* status)
{
  WL_BEGIN();
  uintptr_t key = req ? (uintptr_t)*req : 0;
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Wait(req, st);
  if (wl_on && rc == MPI_SUCCESS) {
    wl_req_t r;
    int found = wl_req_take(key, &r);
    if (found)
      wl_resolve(&r, st, MPI_COMM_WORLD);
    wl_record_completion(found, &r, t0_, wl_now(), wl_site(ra_));
  }
  return rc;
}

int MPI_Waitany(int count, MPI_Request reqs[], int* index, MPI_Status* status)
{
  WL_BEGIN();
  uintptr_t* keys = wl_malloc(sizeof(uintptr_t) * (size_t)(count > 0 ? count : 1));
  for (int i = 0; i < count; i++)
    keys[i] = (uintptr_t)reqs[i];
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Waitany(count, reqs, index, st);
  if (wl_on && rc == MPI_SUCCESS && *index != MPI_UNDEFINED) {
    wl_req_t r;
    int found = wl_req_take(keys[*index], &r);
    if (found)
      wl_resolve(&r, st, MPI_COMM_WORLD);
    wl_record_completion(found, &r, t0_, wl_now(), wl_site(ra_));
  }
  free(keys);
  return rc;
}

/* Requests `keys[idx[j]]` (j < n; idx NULL: all) completed by one call: one waitall record for the point-to-point
 * ones (which requests it completed is known from the event table: every request not completed by its own wait),
 * then one record of each nonblocking collective it completed. */
static void wl_completed(int n, const uintptr_t* keys, const int* idx, MPI_Status* st, double t0, const void* ra)
{
  int p2p = 0, colls = 0;
  wl_req_t* coll = NULL;
  for (int j = 0; j < n; j++) {
    wl_req_t r;
    if (!wl_req_take(keys[idx ? idx[j] : j], &r))
      continue;
    if (r.coll >= 0) {
      if (coll == NULL)
        coll = wl_malloc(sizeof(wl_req_t) * (size_t)n);
      coll[colls++] = r;
    } else {
      wl_resolve(&r, st ? &st[j] : NULL, MPI_COMM_WORLD);
      p2p++;
    }
  }
  double t1 = wl_now();
  uint64_t site = wl_site(ra);
  if (p2p || !colls)
    wl_push(WL_WAITALL, t0, t1, -1, 0, 0, 0.0, 0.0, -1, site, 0);
  for (int c = 0; c < colls; c++)
    wl_push(coll[c].coll, t0, t1, coll[c].peer, 0, coll[c].cid, coll[c].value, coll[c].value2, -1, site, 0);
  free(coll);
}

/* Requests completed by a call that may complete only some of them (Waitsome): one completion record per request,
 * the first with the call's times, the others at its exit, so each is matched to its own request. */
static void wl_completed_each(int n, const uintptr_t* keys, const int* idx, MPI_Status* st, double t0, const void* ra)
{
  double t1 = wl_now();
  uint64_t site = wl_site(ra);
  int first = 1;
  for (int j = 0; j < n; j++) {
    wl_req_t r;
    if (!wl_req_take(keys[idx[j]], &r))
      continue;
    if (r.coll < 0)
      wl_resolve(&r, st ? &st[j] : NULL, MPI_COMM_WORLD);
    wl_record_completion(1, &r, first ? t0 : t1, t1, site);
    first = 0;
  }
  if (first) /* only requests waitlab does not track */
    wl_push(WL_TEST, t0, t1, -1, 0, 0, 0.0, 0.0, -1, site, 0);
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[])
{
  WL_BEGIN();
  size_t n = (size_t)(count > 0 ? count : 1);
  uintptr_t* keys = wl_malloc(sizeof(uintptr_t) * n);
  MPI_Status* own = statuses == MPI_STATUSES_IGNORE ? wl_malloc(sizeof(MPI_Status) * n) : NULL;
  for (int i = 0; i < count; i++)
    keys[i] = (uintptr_t)reqs[i];
  int rc = PMPI_Waitall(count, reqs, own ? own : statuses);
  if (wl_on && rc == MPI_SUCCESS)
    wl_completed(count, keys, NULL, own ? own : statuses, t0_, ra_);
  free(keys);
  free(own);
  return rc;
}

int MPI_Waitsome(int incount, MPI_Request reqs[], int* outcount, int indices[], MPI_Status statuses[])
{
  WL_BEGIN();
  size_t n = (size_t)(incount > 0 ? incount : 1);
  uintptr_t* keys = wl_malloc(sizeof(uintptr_t) * n);
  for (int i = 0; i < incount; i++)
    keys[i] = (uintptr_t)reqs[i];
  MPI_Status* own = statuses == MPI_STATUSES_IGNORE ? wl_malloc(sizeof(MPI_Status) * n) : NULL;
  MPI_Status* st = own ? own : statuses;
  int rc = PMPI_Waitsome(incount, reqs, outcount, indices, st);
  if (wl_on && rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED)
    wl_completed_each(*outcount, keys, indices, st, t0_, ra_);
  free(keys);
  free(own);
  return rc;
}

int MPI_Test(MPI_Request* req, int* flag, MPI_Status* status)
{
  WL_BEGIN();
  uintptr_t key = req ? (uintptr_t)*req : 0;
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Test(req, flag, st);
  if (wl_on && rc == MPI_SUCCESS && *flag && key != 0) {
    /* only a test that completes a request is recorded (as the wait completing it) */
    wl_req_t r;
    int found = wl_req_take(key, &r);
    if (found) {
      wl_resolve(&r, st, MPI_COMM_WORLD);
      wl_record_completion(found, &r, t0_, wl_now(), wl_site(ra_));
    }
  }
  return rc;
}

int MPI_Testall(int count, MPI_Request reqs[], int* flag, MPI_Status statuses[])
{
  WL_BEGIN();
  size_t n = (size_t)(count > 0 ? count : 1);
  uintptr_t* keys = wl_malloc(sizeof(uintptr_t) * n);
  MPI_Status* own = statuses == MPI_STATUSES_IGNORE ? wl_malloc(sizeof(MPI_Status) * n) : NULL;
  for (int i = 0; i < count; i++)
    keys[i] = (uintptr_t)reqs[i];
  int rc = PMPI_Testall(count, reqs, flag, own ? own : statuses);
  if (wl_on && rc == MPI_SUCCESS && *flag)
    wl_completed(count, keys, NULL, own ? own : statuses, t0_, ra_);
  free(keys);
  free(own);
  return rc;
}

/* ---- persistent requests -------------------------------------------------------------------------------------- */

static void wl_persist_add(MPI_Request req, int code, int peer, int tag, MPI_Comm comm, double bytes)
{
  if (req == MPI_REQUEST_NULL)
    return;
  wl_persist = wl_grow(wl_persist, &wl_cap_persist, wl_n_persist + 1, sizeof(wl_persist_t));
  int unresolved = code == WL_IRECV && (peer == MPI_ANY_SOURCE || tag == MPI_ANY_TAG);
  int world = peer == MPI_ANY_SOURCE ? -1 : wl_world(comm, peer);
  wl_persist[wl_n_persist++] = (wl_persist_t){(uintptr_t)req, code, world, tag, unresolved, comm, bytes};
}

#define WL_SEND_INIT(NAME, PNAME, CODE)                                                                                \
  int NAME(const void* buf, int count, MPI_Datatype dt, int dst, int tag, MPI_Comm comm, MPI_Request* req)             \
  {                                                                                                                    \
    int rc = PNAME(buf, count, dt, dst, tag, comm, req);                                                               \
    if (wl_on && rc == MPI_SUCCESS && dst != MPI_PROC_NULL)                                                             \
      wl_persist_add(*req, CODE, dst, tag, comm, wl_bytes(count, dt));                                                 \
    return rc;                                                                                                         \
  }
WL_SEND_INIT(MPI_Send_init, PMPI_Send_init, WL_ISEND)
WL_SEND_INIT(MPI_Ssend_init, PMPI_Ssend_init, WL_ISSEND)
WL_SEND_INIT(MPI_Rsend_init, PMPI_Rsend_init, WL_ISEND)
WL_SEND_INIT(MPI_Bsend_init, PMPI_Bsend_init, WL_ISEND)

int MPI_Recv_init(void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Request* req)
{
  int rc = PMPI_Recv_init(buf, count, dt, src, tag, comm, req);
  if (wl_on && rc == MPI_SUCCESS && src != MPI_PROC_NULL)
    wl_persist_add(*req, WL_IRECV, src, tag, comm, wl_bytes(count, dt));
  return rc;
}

/* One started persistent request: an isend/issend/irecv record, completed like any other request. */
static void wl_started(MPI_Request req, double t0, double t1, uint64_t site)
{
  wl_persist_t* p = wl_persist_find((uintptr_t)req);
  if (p == NULL)
    return;
  int64_t op = wl_push(p->code, t0, t1, p->peer, p->tag, wl_comm_id(p->comm), p->bytes, 0.0, -1, site, 0);
  wl_req_add((uintptr_t)req, op, p->peer, p->tag, p->code == WL_IRECV, p->unresolved, p->comm);
}

int MPI_Start(MPI_Request* req)
{
  WL_BEGIN();
  int rc = PMPI_Start(req);
  if (wl_on && rc == MPI_SUCCESS)
    wl_started(*req, t0_, wl_now(), wl_site(ra_));
  return rc;
}

int MPI_Startall(int count, MPI_Request reqs[])
{
  WL_BEGIN();
  int rc = PMPI_Startall(count, reqs);
  if (wl_on && rc == MPI_SUCCESS) {
    double t1 = wl_now();
    for (int i = 0; i < count; i++)
      wl_started(reqs[i], i ? t1 : t0_, t1, wl_site(ra_));
  }
  return rc;
}

int MPI_Request_free(MPI_Request* req)
{
  uintptr_t key = req ? (uintptr_t)*req : 0;
  int rc = PMPI_Request_free(req);
  wl_persist_t* p = key ? wl_persist_find(key) : NULL;
  if (p != NULL)
    *p = wl_persist[--wl_n_persist];
  return rc;
}

/* ---- MPI_Wtime: a program that spins on it under computation = "none" never advances the clock ----------------- */

#define WL_SPIN_LIMIT 1000000LL

double MPI_Wtime(void)
{
  double t = PMPI_Wtime();
  if (wl_on) {
    if (t == wl_wtime_last) {
      if (++wl_wtime_spin == WL_SPIN_LIMIT)
        wl_die("MPI_Wtime returned the same time 1,000,000 times in a row with no MPI call in between: the program "
               "waits for time to pass, but under application.computation = \"none\" its own computation takes no "
               "simulated time, so it would spin forever. Set application.computation = \"measured\" (or give "
               "simulation.smpi = {\"smpi/wtime\" = \"1e-7\"}) for programs that loop on MPI_Wtime");
    } else {
      wl_wtime_spin = 0;
      wl_wtime_last = t;
    }
  }
  return t;
}

/* ---- collectives ---------------------------------------------------------------------------------------------- */

#define WL_COLL(code, peer, comm, v, v2)                                                                               \
  wl_push((code), t0_, wl_now(), (peer), 0, wl_comm_id(comm), (v), (v2), -1, wl_site(ra_), 0)

static void wl_vector(int64_t op, int n, const int* scounts, MPI_Datatype stype, const int* rcounts,
                      MPI_Datatype rtype, double* ssum, double* rsum)
{
  int ssize = 0, rsize = 0;
  if (scounts && stype != MPI_DATATYPE_NULL)
    PMPI_Type_size(stype, &ssize);
  if (rcounts && rtype != MPI_DATATYPE_NULL)
    PMPI_Type_size(rtype, &rsize);
  *ssum = *rsum = 0;
  wl_text(&wl_vec, &wl_vec_len, &wl_vec_cap, "%lld %d", (long long)op, n);
  for (int i = 0; i < n; i++) {
    long long b = scounts ? (long long)scounts[i] * ssize : 0;
    *ssum += (double)b;
    wl_text(&wl_vec, &wl_vec_len, &wl_vec_cap, " %lld", b);
  }
  for (int i = 0; i < n; i++) {
    long long b = rcounts ? (long long)rcounts[i] * rsize : 0;
    *rsum += (double)b;
    wl_text(&wl_vec, &wl_vec_len, &wl_vec_cap, " %lld", b);
  }
  wl_text(&wl_vec, &wl_vec_len, &wl_vec_cap, "\n");
}

static int64_t wl_vcoll(int code, double t0, const void* ra, int peer, MPI_Comm comm, const int* scounts,
                        MPI_Datatype stype, const int* rcounts, MPI_Datatype rtype, double sscalar, double rscalar)
{
  int n;
  PMPI_Comm_size(comm, &n);
  int64_t op = wl_push(code, t0, wl_now(), peer, 0, wl_comm_id(comm), 0.0, 0.0, -1, wl_site(ra), 0);
  double ssum, rsum;
  wl_vector(op, n, scounts, stype, rcounts, rtype, &ssum, &rsum);
  wl_args[op].value = scounts ? ssum : sscalar;
  wl_args[op].value2 = rcounts ? rsum : rscalar;
  return op;
}

int MPI_Alltoallv(const void* sbuf, const int* scounts, const int* sdispls, MPI_Datatype stype, void* rbuf,
                  const int* rcounts, const int* rdispls, MPI_Datatype rtype, MPI_Comm comm)
{
  WL_BEGIN();
  int rc = PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
  if (wl_on && rc == MPI_SUCCESS)
    wl_vcoll(WL_ALLTOALLV, t0_, ra_, -1, comm, scounts, stype, rcounts, rtype, 0.0, 0.0);
  return rc;
}

int MPI_Gatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int* rcounts, const int* displs,
                MPI_Datatype rtype, int root, MPI_Comm comm)
{
  WL_BEGIN();
  int rc = PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm);
  if (wl_on && rc == MPI_SUCCESS) {
    int me;
    PMPI_Comm_rank(comm, &me);
    wl_vcoll(WL_GATHERV, t0_, ra_, wl_root(comm, root), comm, NULL, stype, me == root ? rcounts : NULL, rtype,
             wl_bytes(scount, stype), 0.0);
  }
  return rc;
}

int MPI_Scatterv(const void* sbuf, const int* scounts, const int* displs, MPI_Datatype stype, void* rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm)
{
  WL_BEGIN();
  int rc = PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm);
  if (wl_on && rc == MPI_SUCCESS) {
    int me;
    PMPI_Comm_rank(comm, &me);
    wl_vcoll(WL_SCATTERV, t0_, ra_, wl_root(comm, root), comm, me == root ? scounts : NULL, stype, NULL, rtype, 0.0,
             wl_bytes(rcount, rtype));
  }
  return rc;
}

int MPI_Allgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int* rcounts,
                   const int* displs, MPI_Datatype rtype, MPI_Comm comm)
{
  WL_BEGIN();
  int rc = PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
  if (wl_on && rc == MPI_SUCCESS)
    wl_vcoll(WL_ALLGATHERV, t0_, ra_, -1, comm, NULL, stype, rcounts, rtype, wl_bytes(scount, stype), 0.0);
  return rc;
}

int MPI_Reduce_scatter(const void* sbuf, void* rbuf, const int* rcounts, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
  WL_BEGIN();
  int rc = PMPI_Reduce_scatter(sbuf, rbuf, rcounts, dt, op, comm);
  if (wl_on && rc == MPI_SUCCESS) {
    /* vocabulary: value = bytes of the whole reduced vector (sum of rcounts), value2 = flops (not measured) */
    int64_t op = wl_vcoll(WL_REDUCESCATTER, t0_, ra_, -1, comm, NULL, dt, rcounts, dt, 0.0, 0.0);
    wl_args[op].value = wl_args[op].value2;
    wl_args[op].value2 = 0.0;
  }
  return rc;
}

/* ---- nonblocking collectives: the generated wrappers record them as their blocking twin in the call that completes
 * them (wl_coll_add, wl_record_completion); nonblocking v-collectives are refused ---------------------------------- */

/* Nonblocking v-collectives are refused: their per-peer counts would have to be kept until completion. */
#define WL_REFUSE(NAME)                                                                                                \
  wl_die(NAME " is not supported by waitlab's measurement layer (nonblocking v-collectives); use the blocking "    \
               "call or the non-v variant")

int MPI_Igatherv(const void* a, int b, MPI_Datatype c, void* d, const int* e, const int* f, MPI_Datatype g, int h,
                 MPI_Comm i, MPI_Request* j)
{
  if (wl_on)
    WL_REFUSE("MPI_Igatherv");
  return PMPI_Igatherv(a, b, c, d, e, f, g, h, i, j);
}

int MPI_Iscatterv(const void* a, const int* b, const int* c, MPI_Datatype d, void* e, int f, MPI_Datatype g, int h,
                  MPI_Comm i, MPI_Request* j)
{
  if (wl_on)
    WL_REFUSE("MPI_Iscatterv");
  return PMPI_Iscatterv(a, b, c, d, e, f, g, h, i, j);
}

int MPI_Ialltoallv(const void* a, const int* b, const int* c, MPI_Datatype d, void* e, const int* f, const int* g,
                   MPI_Datatype h, MPI_Comm i, MPI_Request* j)
{
  if (wl_on)
    WL_REFUSE("MPI_Ialltoallv");
  return PMPI_Ialltoallv(a, b, c, d, e, f, g, h, i, j);
}

int MPI_Iallgatherv(const void* a, int b, MPI_Datatype c, void* d, const int* e, const int* f, MPI_Datatype g,
                    MPI_Comm h, MPI_Request* i)
{
  if (wl_on)
    WL_REFUSE("MPI_Iallgatherv");
  return PMPI_Iallgatherv(a, b, c, d, e, f, g, h, i);
}

/* ---- Fortran bindings: wrap SMPI's own, found with dlsym(RTLD_NEXT) -------------------------------------------- */

extern int mpi_status_ignore_;
extern int mpi_statuses_ignore_;

#define WL_REAL(var, type, sym)                                                                                        \
  static type var = NULL;                                                                                              \
  if (var == NULL) {                                                                                                   \
    var = (type)dlsym(RTLD_NEXT, sym);                                                                                 \
    if (var == NULL)                                                                                                   \
      wl_die("SimGrid has no Fortran binding " sym);                                                                   \
  }

static int wl_fstatus_ignored(const void* st) { return st == (const void*)&mpi_status_ignore_ || st == NULL; }

static uintptr_t wl_fkey(int handle) { return ((uintptr_t)(unsigned)handle << 1) | 1u; }

typedef void (*wl_f_init_t)(int*);
typedef void (*wl_f_init_thread_t)(int*, int*, int*);

void mpi_init_(int* ierr)
{
  WL_REAL(real, wl_f_init_t, "mpi_init_");
  double t0 = wl_now();
  real(ierr);
  wl_start(t0, wl_now(), __builtin_return_address(0));
}

void mpi_init_thread_(int* required, int* provided, int* ierr)
{
  WL_REAL(real, wl_f_init_thread_t, "mpi_init_thread_");
  double t0 = wl_now();
  real(required, provided, ierr);
  wl_start(t0, wl_now(), __builtin_return_address(0));
}

void mpi_finalize_(int* ierr)
{
  WL_REAL(real, wl_f_init_t, "mpi_finalize_");
  WL_BEGIN();
  if (wl_on)
    wl_run_items(INT64_MAX, 0);
  real(ierr);
  if (wl_on && *ierr == MPI_SUCCESS)
    wl_finish(t0_, wl_now(), ra_);
}

typedef void (*wl_f_isend_t)(void*, int*, int*, int*, int*, int*, int*, int*);
typedef void (*wl_f_recv_t)(void*, int*, int*, int*, int*, int*, MPI_Status*, int*);

void mpi_recv_(void* buf, int* count, int* dt, int* src, int* tag, int* comm, MPI_Status* status, int* ierr)
{
  WL_REAL(real, wl_f_recv_t, "mpi_recv_");
  WL_BEGIN();
  MPI_Status own;
  MPI_Status* st = wl_fstatus_ignored(status) ? &own : status;
  real(buf, count, dt, src, tag, comm, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS && *src != MPI_PROC_NULL) {
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    wl_push(WL_RECV, t0_, wl_now(), wl_world(c, st->MPI_SOURCE), st->MPI_TAG, wl_comm_id(c),
            wl_bytes(*count, PMPI_Type_f2c(*dt)), 0.0, -1, wl_site(ra_), 0);
  }
}

void mpi_irecv_(void* buf, int* count, int* dt, int* src, int* tag, int* comm, int* req, int* ierr)
{
  WL_REAL(real, wl_f_isend_t, "mpi_irecv_");
  WL_BEGIN();
  real(buf, count, dt, src, tag, comm, req, ierr);
  if (wl_on && *ierr == MPI_SUCCESS && *src != MPI_PROC_NULL) {
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    int peer = *src == MPI_ANY_SOURCE ? -1 : wl_world(c, *src);
    int64_t op = wl_push(WL_IRECV, t0_, wl_now(), peer, *tag, wl_comm_id(c), wl_bytes(*count, PMPI_Type_f2c(*dt)),
                         0.0, -1, wl_site(ra_), 0);
    wl_req_add(wl_fkey(*req), op, peer, *tag, 1, *src == MPI_ANY_SOURCE || *tag == MPI_ANY_TAG, c);
  }
}

typedef void (*wl_f_sendrecv_t)(void*, int*, int*, int*, int*, void*, int*, int*, int*, int*, int*, MPI_Status*,
                                int*);

void mpi_sendrecv_(void* sbuf, int* scount, int* stype, int* dst, int* stag, void* rbuf, int* rcount, int* rtype,
                   int* src, int* rtag, int* comm, MPI_Status* status, int* ierr)
{
  WL_REAL(real, wl_f_sendrecv_t, "mpi_sendrecv_");
  WL_BEGIN();
  MPI_Status own;
  MPI_Status* st = wl_fstatus_ignored(status) ? &own : status;
  real(sbuf, scount, stype, dst, stag, rbuf, rcount, rtype, src, rtag, comm, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS)
    wl_sendrecv(t0_, ra_, *scount, PMPI_Type_f2c(*stype), *dst, *stag, *rcount, PMPI_Type_f2c(*rtype), *src,
                PMPI_Comm_f2c(*comm), st);
}

typedef void (*wl_f_wait_t)(int*, MPI_Status*, int*);
typedef void (*wl_f_waitall_t)(int*, int*, MPI_Status*, int*);

void mpi_wait_(int* req, MPI_Status* status, int* ierr)
{
  WL_REAL(real, wl_f_wait_t, "mpi_wait_");
  WL_BEGIN();
  uintptr_t key = wl_fkey(*req);
  MPI_Status own;
  MPI_Status* st = wl_fstatus_ignored(status) ? &own : status;
  real(req, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS) {
    wl_req_t r;
    int found = wl_req_take(key, &r);
    if (found)
      wl_resolve(&r, st, MPI_COMM_WORLD);
    wl_record_completion(found, &r, t0_, wl_now(), wl_site(ra_));
  }
}

void mpi_waitall_(int* count, int* reqs, MPI_Status* statuses, int* ierr)
{
  WL_REAL(real, wl_f_waitall_t, "mpi_waitall_");
  WL_BEGIN();
  int n = *count > 0 ? *count : 1;
  uintptr_t* keys = wl_malloc(sizeof(uintptr_t) * (size_t)n);
  for (int i = 0; i < *count; i++)
    keys[i] = wl_fkey(reqs[i]);
  int ignored = statuses == NULL || (const void*)statuses == (const void*)&mpi_statuses_ignore_;
  MPI_Status* own = ignored ? wl_malloc(sizeof(MPI_Status) * (size_t)n) : NULL;
  real(count, reqs, own ? own : statuses, ierr);
  if (wl_on && *ierr == MPI_SUCCESS)
    wl_completed(*count, keys, NULL, own ? own : statuses, t0_, ra_);
  free(keys);
  free(own);
}

typedef void (*wl_f_a2av_t)(void*, int*, int*, int*, void*, int*, int*, int*, int*, int*);

void mpi_alltoallv_(void* sbuf, int* scounts, int* sdispls, int* stype, void* rbuf, int* rcounts, int* rdispls,
                    int* rtype, int* comm, int* ierr)
{
  WL_REAL(real, wl_f_a2av_t, "mpi_alltoallv_");
  WL_BEGIN();
  real(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, ierr);
  if (wl_on && *ierr == MPI_SUCCESS)
    wl_vcoll(WL_ALLTOALLV, t0_, ra_, -1, PMPI_Comm_f2c(*comm), scounts, PMPI_Type_f2c(*stype), rcounts,
             PMPI_Type_f2c(*rtype), 0.0, 0.0);
}

/* ---- generated wrappers: sends, scalar collectives (blocking and nonblocking), C and Fortran ------------------ */

#include "waitlab_wrappers.inc"

/* One-sided communication (RMA): its own file, same translation unit. */
#include "waitlab_pmpi_rma.c"
