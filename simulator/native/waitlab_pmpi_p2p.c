/* waitlab_pmpi_p2p.c: point-to-point C bindings, completions, persistent requests, MPI_Wtime guard.
 * Part of waitlab's measurement layer: #included by waitlab_pmpi.c (one translation unit, so the static
 * helpers and state of waitlab_pmpi.c are shared).  Not compiled on its own. */

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
    wl_charge_counted();                                                                                               \
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

/* A sendrecv, recorded as isend + irecv + waitall (which is how SMPI runs it); the receive's bytes as received.
 * The three records carry the name "MPI_Sendrecv" (a region name id; MPI records otherwise have none), so the
 * outputs name the call the program made (the event table's `call` column). */
static void wl_sendrecv(double t0, const void* ra, int scount, MPI_Datatype stype, int dst, int stag, int rcount,
                        MPI_Datatype rtype, int src, MPI_Comm comm, MPI_Status* st)
{
  static int call = -1;
  if (call < 0)
    call = wl_name_id("MPI_Sendrecv");
  double t1 = wl_now();
  int cid = wl_comm_id(comm);
  uint64_t site = wl_site(ra);
  if (dst != MPI_PROC_NULL)
    wl_push(WL_ISEND, t0, t0, wl_world(comm, dst), stag, cid, wl_bytes(scount, stype), 0.0, call, site, 0);
  if (src != MPI_PROC_NULL) {
    int got = 0;
    double bytes = PMPI_Get_count(st, MPI_BYTE, &got) == MPI_SUCCESS && got != MPI_UNDEFINED && got >= 0
                       ? (double)got
                       : wl_bytes(rcount, rtype);
    wl_push(WL_IRECV, t0, t0, wl_world(comm, st->MPI_SOURCE), st->MPI_TAG, cid, bytes, 0.0, call, site, 0);
  }
  wl_push(WL_WAITALL, t0, t1, -1, 0, cid, 0.0, 0.0, call, site, 0);
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
  if (wl_on)
    wl_charge_counted(); /* computation = "counted": the time read includes the computation before it */
  double t = PMPI_Wtime();
  if (wl_on) {
    if (t == wl_wtime_last) {
      if (++wl_wtime_spin == WL_SPIN_LIMIT)
        wl_die("MPI_Wtime returned the same time 1,000,000 times in a row with no MPI call in between: the program "
               "waits for time to pass, but under application.computation = \"none\" its own computation takes no "
               "simulated time, so it would spin forever. Set application.computation = \"measured\" (or give "
               "[simulation] config = {\"smpi/wtime\" = \"1e-7\"}: each MPI_Wtime call then costs 0.1 us; or "
               "computation \"counted\" with its flops_per_block) for programs that loop on MPI_Wtime");
    } else {
      wl_wtime_spin = 0;
      wl_wtime_last = t;
    }
  }
  return t;
}

