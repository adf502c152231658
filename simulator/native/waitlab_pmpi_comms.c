/* waitlab_pmpi_comms.c: communicators, requests, names, start and end, region markers.
 * Part of waitlab's measurement layer: #included by waitlab_pmpi.c (one translation unit, so the static
 * helpers and state of waitlab_pmpi.c are shared).  Not compiled on its own. */

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

/* Per id - 1: the communicator's ordinal among those of its member list (0: the id wl_comm_id gives every
 * communicator of that list; k >= 1: wl_p2p_comm_id's k-th other one), and how many communicator handles of the list
 * wl_p2p_comm_id has met (for ordinal-0 entries). */
static int* wl_comm_ords = NULL;
static int* wl_comm_handles = NULL;
static int wl_world_handles = 0; /* handles other than MPI_COMM_WORLD with the world's ranks in order */
static int wl_p2p_keyval = MPI_KEYVAL_INVALID;

/* A new id for communicator members[0..size-1] (taken over) with ordinal ord; its line in r<rank>.comms is
 * "id m0 m1 ..." and " #ord" after it when ord > 0. */
static int wl_comm_new(int* members, int size, int ord)
{
  wl_comm_members = realloc(wl_comm_members, sizeof(int*) * (size_t)(wl_n_comms + 1));
  wl_comm_sizes = realloc(wl_comm_sizes, sizeof(int) * (size_t)(wl_n_comms + 1));
  wl_comm_ords = realloc(wl_comm_ords, sizeof(int) * (size_t)(wl_n_comms + 1));
  wl_comm_handles = realloc(wl_comm_handles, sizeof(int) * (size_t)(wl_n_comms + 1));
  if (wl_comm_members == NULL || wl_comm_sizes == NULL || wl_comm_ords == NULL || wl_comm_handles == NULL)
    wl_die("out of memory");
  wl_comm_members[wl_n_comms] = members;
  wl_comm_sizes[wl_n_comms] = size;
  wl_comm_ords[wl_n_comms] = ord;
  wl_comm_handles[wl_n_comms] = 0;
  wl_n_comms++;
  wl_text(&wl_comms, &wl_comms_len, &wl_comms_cap, "%d", wl_n_comms);
  for (int i = 0; i < size; i++)
    wl_text(&wl_comms, &wl_comms_len, &wl_comms_cap, " %d", members[i]);
  if (ord > 0)
    wl_text(&wl_comms, &wl_comms_len, &wl_comms_cap, " #%d", ord);
  wl_text(&wl_comms, &wl_comms_len, &wl_comms_cap, "\n");
  return wl_n_comms;
}

/* World ranks of comm's members, in communicator-rank order (heap; *size: how many). */
static int* wl_comm_world_ranks(MPI_Comm comm, int* size)
{
  PMPI_Comm_size(comm, size);
  int* members = wl_malloc(sizeof(int) * (size_t)*size);
  int* idx = wl_malloc(sizeof(int) * (size_t)*size);
  MPI_Group g, w;
  PMPI_Comm_group(comm, &g);
  PMPI_Comm_group(MPI_COMM_WORLD, &w);
  for (int i = 0; i < *size; i++)
    idx[i] = i;
  PMPI_Group_translate_ranks(g, *size, idx, w, members);
  PMPI_Group_free(&g);
  PMPI_Group_free(&w);
  free(idx);
  return members;
}

/* 0 for MPI_COMM_WORLD (or a communicator with the same ranks in the same order), else a per-rank id >= 1
 * whose member list is written to r<rank>.comms: the collectives' communicator (one per member list). */
static int wl_comm_id(MPI_Comm comm)
{
  if (comm == MPI_COMM_WORLD)
    return 0;
  int size;
  int* members = wl_comm_world_ranks(comm, &size);
  int identity = size == wl_size;
  for (int i = 0; identity && i < size; i++)
    identity = members[i] == i;
  if (identity) {
    free(members);
    return 0;
  }
  for (int c = 0; c < wl_n_comms; c++) {
    if (wl_comm_ords[c] == 0 && wl_comm_sizes[c] == size &&
        memcmp(wl_comm_members[c], members, sizeof(int) * (size_t)size) == 0) {
      free(members);
      return c + 1;
    }
  }
  return wl_comm_new(members, size, 0);
}

/* The communicator id of a point-to-point record: MPI matches a message on its own communicator only, so two
 * communicators of one member list (MPI_COMM_WORLD and a duplicate of it, two duplicates of a sub-communicator) get
 * two ids.  The first handle of a member list this rank uses for point-to-point has wl_comm_id's id (MPI_COMM_WORLD:
 * 0); the k-th other one (in the order this rank first uses them) an id of ordinal k.  The rank's id of a handle is
 * kept in an attribute (deleted with the communicator, not copied by MPI_Comm_dup).  Every rank numbers the
 * communicators of a member list in the order it first uses them: ranks that use two such communicators in
 * different orders would get them crossed. */
static int wl_p2p_comm_id(MPI_Comm comm)
{
  if (comm == MPI_COMM_WORLD)
    return 0;
  if (wl_p2p_keyval == MPI_KEYVAL_INVALID)
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &wl_p2p_keyval, NULL);
  void* v = NULL;
  int flag = 0;
  PMPI_Comm_get_attr(comm, wl_p2p_keyval, &v, &flag);
  if (flag)
    return (int)(intptr_t)v - 1;
  int id = wl_comm_id(comm);
  int ord = id == 0 ? ++wl_world_handles : wl_comm_handles[id - 1]++;
  if (ord > 0) {
    int size;
    int* members = wl_comm_world_ranks(comm, &size);
    id = wl_comm_new(members, size, ord);
  }
  PMPI_Comm_set_attr(comm, wl_p2p_keyval, (void*)(intptr_t)(id + 1));
  return id;
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
  wl_req_t r = {key, op, peer, tag, is_recv, unresolved, -1, -1, comm, 0.0, 0.0, 0, 0.0, 0.0, NULL, 0};
  wl_req_insert(&r);
}

/* Clock read at the post of a nonblocking collective (not an anchor: no injected item runs); with computation =
 * "measured" SMPI first books the program's computation since the last call, as WL_BEGIN does. */
static double wl_post_clock(void)
{
  if (wl_on && wl_measured) {
    smpi_bench_end();
    smpi_bench_begin();
  }
  if (wl_on) {
    wl_charge_counted();
    wl_poll_flush(); /* a run of failed polls before the post is MPI time of its own */
  }
  return wl_now();
}

/* A nonblocking collective posted over [t0, t1]: recorded as its blocking twin `code` when it completes. */
static void wl_coll_add(uintptr_t key, int code, int root, int cid, double value, double value2, double t0, double t1)
{
  if (key == 0)
    return;
  wl_req_t r = {key, -1, root, 0, 0, 0, code, cid, MPI_COMM_NULL, value, value2, ++wl_nbc_serial, t0, t1, NULL, 0};
  wl_req_insert(&r);
}

/* A nonblocking reduce-scatter of comm posted over [t0, t1], each member receiving rbytes[i] bytes: recorded as a
 * `reducescatter` (value: the bytes of the reduced vector) when it completes, with its per-member counts. */
static void wl_coll_add_vec(uintptr_t key, int code, MPI_Comm comm, const long long* rbytes, double t0, double t1)
{
  if (key == 0)
    return;
  int n;
  PMPI_Comm_size(comm, &n);
  long long* vec = wl_malloc(sizeof(long long) * (size_t)(n > 0 ? n : 1));
  double sum = 0.0;
  for (int i = 0; i < n; i++) {
    vec[i] = rbytes[i];
    sum += (double)rbytes[i];
  }
  wl_req_t r = {key, -1, -1, 0, 0, 0, code, wl_comm_id(comm), MPI_COMM_NULL, sum, 0.0, ++wl_nbc_serial, t0, t1, vec,
                n};
  wl_req_insert(&r);
}

/* The per-peer byte counts of v-collective record `op` (r<rank>.vec: "op n s_0..s_n-1 r_0..r_n-1"; NULL: zeros);
 * their sums to *ssum and *rsum. */
static void wl_vector_bytes(int64_t op, int n, const long long* sbytes, const long long* rbytes, double* ssum,
                            double* rsum)
{
  *ssum = *rsum = 0;
  wl_text(&wl_vec, &wl_vec_len, &wl_vec_cap, "%lld %d", (long long)op, n);
  for (int i = 0; i < n; i++) {
    long long b = sbytes ? sbytes[i] : 0;
    *ssum += (double)b;
    wl_text(&wl_vec, &wl_vec_len, &wl_vec_cap, " %lld", b);
  }
  for (int i = 0; i < n; i++) {
    long long b = rbytes ? rbytes[i] : 0;
    *rsum += (double)b;
    wl_text(&wl_vec, &wl_vec_len, &wl_vec_cap, " %lld", b);
  }
  wl_text(&wl_vec, &wl_vec_len, &wl_vec_cap, "\n");
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

/* The record of a completed nonblocking collective over [t0, t1] (tag: its serial), and the post it had
 * (r<rank>.nbc, so a capture posts it where the program did) or its per-member counts (a reduce-scatter: the replay
 * has no nonblocking form of it, so a capture replays it blocking at this completion). */
static void wl_coll_completed(wl_req_t* r, double t0, double t1, uint64_t site)
{
  int64_t op = wl_push(r->coll, t0, t1, r->peer, (int)r->serial, r->cid, r->value, r->value2, -1, site, 0);
  if (r->vec != NULL) {
    double ssum, rsum;
    wl_vector_bytes(op, r->n_vec, NULL, r->vec, &ssum, &rsum);
    free(r->vec);
    r->vec = NULL;
  } else {
    wl_text(&wl_nbc, &wl_nbc_len, &wl_nbc_cap, "%lld %.17g %.17g\n", (long long)r->serial, r->t_post0, r->t_post1);
  }
}

/* call: the name id of the call the `wait` record is named after (MPI_Waitany, MPI_Waitsome: the event table's
 * `call`), -1 for none (MPI_Wait, and the MPI_Test* calls, whose completions are exported differently). */
static void wl_record_completion(int found, wl_req_t* r, double t0, double t1, uint64_t site, int call)
{
  if (found && r->coll >= 0) /* a nonblocking collective: its wait is the collective's (Scalasca) */
    wl_coll_completed(r, t0, t1, site);
  else if (found)
    wl_push(WL_WAIT, t0, t1, r->peer, r->tag, r->op >= 0 ? wl_args[r->op].comm : 0, 0.0, r->is_recv ? 1.0 : 0.0,
            call, site, 0);
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

static void wl_report_inside(int failed, void* data); /* waitlab_pmpi_abort.c */

static void wl_start(double t0, double t1, const void* ra)
{
  PMPI_Comm_rank(MPI_COMM_WORLD, &wl_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &wl_size);
  wl_count_open();
  Dl_info info;
  if (dladdr((void*)&wl_start, &info) && info.dli_fbase)
    wl_base = (char*)info.dli_fbase;
  wl_load_schedule();
  const char* measured = getenv("WAITLAB_MEASURED");
  wl_measured = measured != NULL && strcmp(measured, "1") == 0;
  const char* counted = getenv("WAITLAB_COUNTED");
  wl_flops_per_block = counted != NULL ? strtod(counted, NULL) : 0.0;
  wl_blocks_charged = wl_blocks; /* computation before MPI_Init is not charged */
  wl_on = 1;
  sg_actor_on_exit(wl_report_inside, NULL);
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
  wl_write(dir, "r", "nbc", wl_nbc, wl_nbc_len);
  char done[64];
  int n = snprintf(done, sizeof done, "records %lld\n", (long long)wl_n);
  wl_write(dir, "r", "done", done, (size_t)n);
}

/* ---- region markers (waitlab.h) ------------------------------------------------------------------------------- */

/* The regions this rank is in, innermost last: a marker that does not nest stops the run naming it, in the program's
 * own terms, where it happens (the event table could not be built from it). */
static char** wl_open_regions = NULL;
static int wl_open_depth = 0, wl_open_cap = 0;

static void wl_region_push(const char* name)
{
  if (wl_open_depth == wl_open_cap) {
    wl_open_cap = wl_open_cap ? 2 * wl_open_cap : 16;
    wl_open_regions = realloc(wl_open_regions, sizeof(char*) * (size_t)wl_open_cap);
    if (!wl_open_regions)
      wl_die("out of memory");
  }
  wl_open_regions[wl_open_depth++] = strdup(name);
}

static void wl_region_pop(const char* name)
{
  char what[512];
  if (wl_open_depth == 0) {
    snprintf(what, sizeof what, "WAITLAB_REGION_END(\"%.100s\") without a WAITLAB_REGION_BEGIN(\"%.100s\") before "
             "it (fix: pair every WAITLAB_REGION_BEGIN(name) with a WAITLAB_REGION_END(name) on the same rank)", name,
             name);
    wl_die(what);
  }
  const char* open = wl_open_regions[wl_open_depth - 1];
  if (strcmp(open, name) != 0) {
    snprintf(what, sizeof what, "WAITLAB_REGION_END(\"%.100s\") closes region \"%.100s\": regions must nest (fix: "
             "end region \"%.100s\" first)", name, open, open);
    wl_die(what);
  }
  free(wl_open_regions[--wl_open_depth]);
}

/* At MPI_Finalize: a region still open stops the run. */
static void wl_regions_closed(void)
{
  if (wl_open_depth > 0) {
    char what[512];
    snprintf(what, sizeof what, "region \"%.100s\" is entered and never left (fix: call "
             "WAITLAB_REGION_END(\"%.100s\") before MPI_Finalize)", wl_open_regions[wl_open_depth - 1],
             wl_open_regions[wl_open_depth - 1]);
    wl_die(what);
  }
}

void waitlab_region_begin(const char* name)
{
  if (!wl_on)
    return;
  wl_region_push(name ? name : "");
  if (wl_measured) { /* computation = "measured": book the computation before the marker */
    smpi_bench_end();
    smpi_bench_begin();
  }
  wl_charge_counted();
  WL_PRE();
  double t = wl_now();
  wl_push(WL_ENTER, t, t, -1, 0, 0, 0.0, 0.0, wl_name_id(name ? name : ""), wl_site(__builtin_return_address(0)), 0);
}

void waitlab_region_end(const char* name)
{
  if (!wl_on)
    return;
  wl_region_pop(name ? name : "");
  if (wl_measured) {
    smpi_bench_end();
    smpi_bench_begin();
  }
  wl_charge_counted();
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

