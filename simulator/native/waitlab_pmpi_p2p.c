/* waitlab_pmpi_p2p.c: point-to-point C bindings, completions, persistent requests, MPI_Wtime guard.
 * Part of waitlab's measurement layer: #included by waitlab_pmpi.c (one translation unit, so the static
 * helpers and state of waitlab_pmpi.c are shared).  Not compiled on its own. */

/* ---- C bindings ----------------------------------------------------------------------------------------------- */

/* smpi_bench_end() charges the program's computation since the last MPI call (computation = "measured") before the
 * clock is read, so it is booked as compute, not inside this call; smpi_bench_begin() restarts the benchmark.
 * KEEP (evaluated after that charge): whether this call continues or may end the pending run of failed polls
 * (waitlab_pmpi_poll.c); any other call records the run first, and so does one before which injected items are due
 * (none are while a run is pending: they ran before its first poll, the anchor has not moved since). */
#define WL_BEGIN_KEEP(KEEP)                                                                                            \
  const void* ra_ = __builtin_return_address(0);                                                                       \
  if (wl_on) {                                                                                                         \
    if (wl_measured) {                                                                                                 \
      smpi_bench_end();                                                                                                \
      smpi_bench_begin();                                                                                              \
    }                                                                                                                  \
    wl_charge_counted();                                                                                               \
    if (!(KEEP) || wl_items_due())                                                                                     \
      wl_poll_flush();                                                                                                 \
    WL_RUN_ITEMS();                                                                                                    \
  }                                                                                                                    \
  wl_in.call = __func__;                                                                                               \
  wl_in.ra = ra_;                                                                                                      \
  wl_in.kind = 0;                                                                                                      \
  double t0_ = wl_now()

#define WL_BEGIN() WL_BEGIN_KEEP(0)

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
  if (wl_on) {
    wl_regions_closed();
    wl_run_items(INT64_MAX, 0);
  }
  int rc = PMPI_Finalize();
  if (wl_on && rc == MPI_SUCCESS)
    wl_finish(t0_, wl_now(), ra_);
  return rc;
}

static int wl_p2p_send(int code, const void* ra, double t0, int count, MPI_Datatype dt, int dst, int tag,
                       MPI_Comm comm)
{
  return (int)wl_push(code, t0, wl_now(), wl_world(comm, dst), tag, wl_p2p_comm_id(comm), wl_bytes(count, dt), 0.0, -1,
                      wl_site(ra), 0);
}

/* A blocking receive right after probes of its message enters when the first probe did (waitlab_pmpi_poll.c): the
 * time the rank waited in MPI_Probe or an MPI_Iprobe loop is this receive's, a late sender's wait. */
int MPI_Recv(void* buf, int count, MPI_Datatype dt, int src, int tag, MPI_Comm comm, MPI_Status* status)
{
  WL_BEGIN_KEEP(src != MPI_PROC_NULL && wl_poll_keeps_msg(comm, src, tag));
  WL_IN(WL_IN_FROM, src, 0, tag, comm);
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Recv(buf, count, dt, src, tag, comm, st);
  if (wl_on && rc == MPI_SUCCESS && src != MPI_PROC_NULL) {
    int got = 0;
    PMPI_Get_count(st, MPI_BYTE, &got);
    wl_push(WL_RECV, wl_poll_take(t0_), wl_now(), wl_world(comm, st->MPI_SOURCE), st->MPI_TAG, wl_p2p_comm_id(comm),
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
    int64_t op = wl_push(WL_IRECV, t0_, wl_now(), peer, tag, wl_p2p_comm_id(comm), wl_bytes(count, dt), 0.0, -1,
                         wl_site(ra_), 0);
    wl_req_add((uintptr_t)*req, op, peer, tag, 1, unresolved, comm);
  }
  return rc;
}

/* A sendrecv, recorded as isend + irecv + waitall (which is how SMPI runs it); the receive's bytes as received.
 * The three records carry the call's name `call` ("MPI_Sendrecv": a region name id; MPI records otherwise have
 * none), so the outputs name the call the program made (the event table's `call` column).
 * With MPI_PROC_NULL on both sides nothing is sent or received: one `test` record (a waitall of no request would
 * complete the rank's pending requests in the matching). */
static void wl_sendrecv(double t0, const void* ra, int scount, MPI_Datatype stype, int dst, int stag, int rcount,
                        MPI_Datatype rtype, int src, MPI_Comm comm, MPI_Status* st, int call)
{
  double t1 = wl_now();
  int cid = wl_p2p_comm_id(comm);
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
  wl_push(dst == MPI_PROC_NULL && src == MPI_PROC_NULL ? WL_TEST : WL_WAITALL, t0, t1, -1, 0, cid, 0.0, 0.0, call,
          site, 0);
}

/* Call name ids of the sendrecvs (per rank: SMPI privatizes this file's static data). */
static int wl_sendrecv_name(void)
{
  static int id = -1;
  if (id < 0)
    id = wl_name_id("MPI_Sendrecv");
  return id;
}

int MPI_Sendrecv(const void* sbuf, int scount, MPI_Datatype stype, int dst, int stag, void* rbuf, int rcount,
                 MPI_Datatype rtype, int src, int rtag, MPI_Comm comm, MPI_Status* status)
{
  WL_BEGIN();
  WL_IN(WL_IN_BOTH, src, dst, rtag, comm);
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Sendrecv(sbuf, scount, stype, dst, stag, rbuf, rcount, rtype, src, rtag, comm, st);
  if (wl_on && rc == MPI_SUCCESS)
    wl_sendrecv(t0_, ra_, scount, stype, dst, stag, rcount, rtype, src, comm, st, wl_sendrecv_name());
  return rc;
}

/* MPI_Sendrecv_replace: a sendrecv of one buffer (SMPI runs it as a sendrecv through a temporary buffer), recorded
 * as MPI_Sendrecv is, call name included: the outputs name its operation as the vocabulary's (sendRecv). */
int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype dt, int dst, int stag, int src, int rtag, MPI_Comm comm,
                         MPI_Status* status)
{
  WL_BEGIN();
  WL_IN(WL_IN_BOTH, src, dst, rtag, comm);
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Sendrecv_replace(buf, count, dt, dst, stag, src, rtag, comm, st);
  if (wl_on && rc == MPI_SUCCESS)
    wl_sendrecv(t0_, ra_, count, dt, dst, stag, count, dt, src, comm, st, wl_sendrecv_name());
  return rc;
}

/* ---- completions and polls ------------------------------------------------------------------------------------
 * A completion call right after failed polls of one of its requests takes their run (waitlab_pmpi_poll.c): its
 * record enters when the first poll did.  A poll that completes nothing continues or starts the run. */

/* The handles of reqs[0..count), before the call changes them (completed requests become MPI_REQUEST_NULL). */
static uintptr_t* wl_keys(int count, const MPI_Request* reqs)
{
  uintptr_t* keys = wl_malloc(sizeof(uintptr_t) * (size_t)(count > 0 ? count : 1));
  for (int i = 0; i < count; i++)
    keys[i] = (uintptr_t)reqs[i];
  return keys;
}

/* Call name ids of MPI_Waitany and MPI_Waitsome (per rank, as wl_sendrecv_name): their `wait` records carry them,
 * so the outputs name the call the program made (the event table's `call`), not MPI_Wait. */
static int wl_waitany_name(void)
{
  static int id = -1;
  if (id < 0)
    id = wl_name_id("MPI_Waitany");
  return id;
}

static int wl_waitsome_name(void)
{
  static int id = -1;
  if (id < 0)
    id = wl_name_id("MPI_Waitsome");
  return id;
}

/* One request completed by a call (Wait, Waitany, Test, Testany): its completion record over [t0, now], its `wait`
 * named `call` (wl_record_completion). */
static void wl_completed_one(uintptr_t key, MPI_Status* st, double t0, const void* ra, int call)
{
  wl_req_t r;
  int found = wl_req_take(key, &r);
  if (found)
    wl_resolve(&r, st, MPI_COMM_WORLD);
  wl_record_completion(found, &r, t0, wl_now(), wl_site(ra), call);
}

int MPI_Wait(MPI_Request* req, MPI_Status* status)
{
  uintptr_t key = req ? (uintptr_t)*req : 0;
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(1, &key));
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Wait(req, st);
  if (wl_on && rc == MPI_SUCCESS)
    wl_completed_one(key, st, wl_poll_take(t0_), ra_, -1);
  return rc;
}

int MPI_Waitany(int count, MPI_Request reqs[], int* index, MPI_Status* status)
{
  uintptr_t* keys = wl_keys(count, reqs);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(count, keys));
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Waitany(count, reqs, index, st);
  if (wl_on && rc == MPI_SUCCESS && *index != MPI_UNDEFINED)
    wl_completed_one(keys[*index], st, wl_poll_take(t0_), ra_, wl_waitany_name());
  free(keys);
  return rc;
}

/* Requests `keys[idx[j]]` (j < n; idx NULL: all) completed by one call: one waitall record for the point-to-point
 * ones (which requests it completed is known from the event table: every request not completed by its own wait),
 * and one record of each nonblocking collective it completed, with its serial (wl_record_completion).  The call's
 * times go to one record only, the others are zero-length at its exit (as wl_completed_each), so no second of the
 * call is booked twice: to the first collective when there is one (a halo exchange overlapped with an
 * MPI_Iallreduce, completed by one Waitall, waits for the reduction: its messages came early), else to the waitall
 * record.  A call that completed no request waitlab tracks (null or untracked requests only) is a `test`: a waitall
 * of no request would complete the rank's pending requests in the matching. */
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
  if (colls) /* the record with the call's time comes first: the rank's time before it is its own work */
    wl_coll_completed(&coll[0], t0, t1, site);
  if (p2p || !colls)
    wl_push(p2p ? WL_WAITALL : WL_TEST, colls ? t1 : t0, t1, -1, 0, 0, 0.0, 0.0, -1, site, 0);
  for (int c = 1; c < colls; c++)
    wl_coll_completed(&coll[c], t1, t1, site);
  free(coll);
}

/* Requests completed by a call that may complete only some of them (Waitsome, Testsome): one completion record per
 * request, the first with the call's times, the others at its exit, so each is matched to its own request; their
 * `wait` records named `call` (wl_record_completion). */
static void wl_completed_each(int n, const uintptr_t* keys, const int* idx, MPI_Status* st, double t0, const void* ra,
                              int call)
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
    wl_record_completion(1, &r, first ? t0 : t1, t1, site, call);
    first = 0;
  }
  if (first) /* only requests waitlab does not track */
    wl_push(WL_TEST, t0, t1, -1, 0, 0, 0.0, 0.0, -1, site, 0);
}

/* count zeroed ints (heap). */
static int* wl_zeros(int count)
{
  int* z = wl_malloc(sizeof(int) * (size_t)count);
  for (int j = 0; j < count; j++)
    z[j] = 0;
  return z;
}

/* Which of the count requests an MPI_Testall that returned flag = 0 completed all the same (heap, or NULL if none):
 * SMPI 3.32 completes and nulls the requests that are done even then, which the MPI standard does not. */
static int* wl_nulled(int count, const uintptr_t* keys, const MPI_Request* reqs)
{
  int* done = NULL;
  for (int j = 0; j < count; j++)
    if (keys[j] != 0 && reqs[j] == MPI_REQUEST_NULL) {
      if (done == NULL)
        done = wl_zeros(count);
      done[j] = 1;
    }
  return done;
}

/* An MPI_Testall (C or Fortran) that returned flag = 0: the requests it completed all the same (done[j], taken over)
 * as MPI_Testsome's completions (their statuses at their own index), or a poll when it completed none. */
static void wl_testall_partial(int count, const uintptr_t* keys, int* done, MPI_Status* st, double t0, const void* ra)
{
  if (done == NULL) {
    wl_poll_reqs(t0, wl_now(), count, keys, wl_site(ra));
    return;
  }
  int n = 0;
  MPI_Status* each = st ? wl_malloc(sizeof(MPI_Status) * (size_t)count) : NULL;
  for (int j = 0; j < count; j++)
    if (done[j]) {
      if (each)
        each[n] = st[j];
      done[n++] = j;
    }
  wl_completed_each(n, keys, done, each, wl_poll_take(t0), ra, -1);
  free(each);
  free(done);
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[])
{
  uintptr_t* keys = wl_keys(count, reqs);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(count, keys));
  size_t n = (size_t)(count > 0 ? count : 1);
  MPI_Status* own = statuses == MPI_STATUSES_IGNORE ? wl_malloc(sizeof(MPI_Status) * n) : NULL;
  int rc = PMPI_Waitall(count, reqs, own ? own : statuses);
  if (wl_on && rc == MPI_SUCCESS)
    wl_completed(count, keys, NULL, own ? own : statuses, wl_poll_take(t0_), ra_);
  free(keys);
  free(own);
  return rc;
}

int MPI_Waitsome(int incount, MPI_Request reqs[], int* outcount, int indices[], MPI_Status statuses[])
{
  uintptr_t* keys = wl_keys(incount, reqs);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(incount, keys));
  size_t n = (size_t)(incount > 0 ? incount : 1);
  MPI_Status* own = statuses == MPI_STATUSES_IGNORE ? wl_malloc(sizeof(MPI_Status) * n) : NULL;
  MPI_Status* st = own ? own : statuses;
  int rc = PMPI_Waitsome(incount, reqs, outcount, indices, st);
  if (wl_on && rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED)
    wl_completed_each(*outcount, keys, indices, st, wl_poll_take(t0_), ra_, wl_waitsome_name());
  free(keys);
  free(own);
  return rc;
}

/* A test that completes a request is recorded as the wait completing it (a request waitlab does not track: `test`);
 * one that completes nothing is a poll.  A null request is neither. */
int MPI_Test(MPI_Request* req, int* flag, MPI_Status* status)
{
  uintptr_t key = req ? (uintptr_t)*req : 0;
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(1, &key));
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Test(req, flag, st);
  if (wl_on && rc == MPI_SUCCESS && key != 0) {
    if (*flag)
      wl_completed_one(key, st, wl_poll_take(t0_), ra_, -1);
    else
      wl_poll_reqs(t0_, wl_now(), 1, &key, wl_site(ra_));
  }
  return rc;
}

int MPI_Testany(int count, MPI_Request reqs[], int* index, int* flag, MPI_Status* status)
{
  uintptr_t* keys = wl_keys(count, reqs);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(count, keys));
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Testany(count, reqs, index, flag, st);
  if (wl_on && rc == MPI_SUCCESS) {
    if (*flag && *index != MPI_UNDEFINED)
      wl_completed_one(keys[*index], st, wl_poll_take(t0_), ra_, -1);
    else if (!*flag)
      wl_poll_reqs(t0_, wl_now(), count, keys, wl_site(ra_));
  }
  free(keys);
  return rc;
}

int MPI_Testall(int count, MPI_Request reqs[], int* flag, MPI_Status statuses[])
{
  uintptr_t* keys = wl_keys(count, reqs);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(count, keys));
  size_t n = (size_t)(count > 0 ? count : 1);
  MPI_Status* own = statuses == MPI_STATUSES_IGNORE ? wl_malloc(sizeof(MPI_Status) * n) : NULL;
  MPI_Status* st = own ? own : statuses;
  int rc = PMPI_Testall(count, reqs, flag, st);
  if (wl_on && rc == MPI_SUCCESS) {
    if (*flag)
      wl_completed(count, keys, NULL, st, wl_poll_take(t0_), ra_);
    else
      wl_testall_partial(count, keys, reqs == NULL ? NULL : wl_nulled(count, keys, reqs), st, t0_, ra_);
  }
  free(keys);
  free(own);
  return rc;
}

int MPI_Testsome(int incount, MPI_Request reqs[], int* outcount, int indices[], MPI_Status statuses[])
{
  uintptr_t* keys = wl_keys(incount, reqs);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(incount, keys));
  size_t n = (size_t)(incount > 0 ? incount : 1);
  MPI_Status* own = statuses == MPI_STATUSES_IGNORE ? wl_malloc(sizeof(MPI_Status) * n) : NULL;
  MPI_Status* st = own ? own : statuses;
  int rc = PMPI_Testsome(incount, reqs, outcount, indices, st);
  if (wl_on && rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED) {
    if (*outcount > 0)
      wl_completed_each(*outcount, keys, indices, st, wl_poll_take(t0_), ra_, -1);
    else
      wl_poll_reqs(t0_, wl_now(), incount, keys, wl_site(ra_));
  }
  free(keys);
  free(own);
  return rc;
}

/* MPI_Request_get_status completes nothing (the request stays to be waited for or freed), whatever its flag: a poll
 * of the request (SMPI 3.32 may even say flag = 1 before the message arrived). */
int MPI_Request_get_status(MPI_Request req, int* flag, MPI_Status* status)
{
  uintptr_t key = (uintptr_t)req;
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(1, &key));
  int rc = PMPI_Request_get_status(req, flag, status);
  if (wl_on && rc == MPI_SUCCESS && key != 0)
    wl_poll_reqs(t0_, wl_now(), 1, &key, wl_site(ra_));
  return rc;
}

/* Probes: a probe that found a message is ended by the blocking receive of it right after (MPI_Recv enters when the
 * first probe did); else the probes are MPI time of their own, a `test` record (waitlab_pmpi_poll.c). */
int MPI_Iprobe(int src, int tag, MPI_Comm comm, int* flag, MPI_Status* status)
{
  WL_BEGIN_KEEP(src != MPI_PROC_NULL && wl_poll_keeps_msg(comm, src, tag));
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Iprobe(src, tag, comm, flag, st);
  if (wl_on && rc == MPI_SUCCESS && src != MPI_PROC_NULL)
    wl_poll_probe(t0_, wl_now(), comm, src, tag, *flag ? st : NULL, wl_site(ra_));
  return rc;
}

int MPI_Probe(int src, int tag, MPI_Comm comm, MPI_Status* status)
{
  WL_BEGIN_KEEP(src != MPI_PROC_NULL && wl_poll_keeps_msg(comm, src, tag));
  WL_IN(WL_IN_FROM, src, 0, tag, comm);
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Probe(src, tag, comm, st);
  if (wl_on && rc == MPI_SUCCESS && src != MPI_PROC_NULL)
    wl_poll_probe(t0_, wl_now(), comm, src, tag, st, wl_site(ra_));
  return rc;
}

/* ---- persistent requests -------------------------------------------------------------------------------------- */

/* A persistent request's template, by key: a C request's handle, a Fortran one's wl_fkey (0: no request). */
static void wl_persist_add(uintptr_t key, int code, int peer, int tag, MPI_Comm comm, double bytes)
{
  if (key == 0)
    return;
  wl_persist = wl_grow(wl_persist, &wl_cap_persist, wl_n_persist + 1, sizeof(wl_persist_t));
  int unresolved = code == WL_IRECV && (peer == MPI_ANY_SOURCE || tag == MPI_ANY_TAG);
  int world = peer == MPI_ANY_SOURCE ? -1 : wl_world(comm, peer);
  wl_persist[wl_n_persist++] = (wl_persist_t){key, code, world, tag, unresolved, comm, bytes};
}

#define WL_SEND_INIT(NAME, PNAME, CODE)                                                                                \
  int NAME(const void* buf, int count, MPI_Datatype dt, int dst, int tag, MPI_Comm comm, MPI_Request* req)             \
  {                                                                                                                    \
    int rc = PNAME(buf, count, dt, dst, tag, comm, req);                                                               \
    if (wl_on && rc == MPI_SUCCESS && dst != MPI_PROC_NULL)                                                             \
      wl_persist_add((uintptr_t)*req, CODE, dst, tag, comm, wl_bytes(count, dt));                                      \
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
    wl_persist_add((uintptr_t)*req, WL_IRECV, src, tag, comm, wl_bytes(count, dt));
  return rc;
}

/* One started persistent request (by key, as wl_persist_add): an isend/issend/irecv record, completed like any
 * other request. */
static void wl_started(uintptr_t key, double t0, double t1, uint64_t site)
{
  wl_persist_t* p = key ? wl_persist_find(key) : NULL;
  if (p == NULL)
    return;
  int64_t op = wl_push(p->code, t0, t1, p->peer, p->tag, wl_p2p_comm_id(p->comm), p->bytes, 0.0, -1, site, 0);
  wl_req_add(key, op, p->peer, p->tag, p->code == WL_IRECV, p->unresolved, p->comm);
}

int MPI_Start(MPI_Request* req)
{
  WL_BEGIN();
  int rc = PMPI_Start(req);
  if (wl_on && rc == MPI_SUCCESS)
    wl_started((uintptr_t)*req, t0_, wl_now(), wl_site(ra_));
  return rc;
}

int MPI_Startall(int count, MPI_Request reqs[])
{
  WL_BEGIN();
  int rc = PMPI_Startall(count, reqs);
  if (wl_on && rc == MPI_SUCCESS) {
    double t1 = wl_now();
    for (int i = 0; i < count; i++)
      wl_started((uintptr_t)reqs[i], i ? t1 : t0_, t1, wl_site(ra_));
  }
  return rc;
}

/* Call name id of the records of MPI_Request_free (per rank, as wl_sendrecv_name). */
static int wl_request_free_name(void)
{
  static int id = -1;
  if (id < 0)
    id = wl_name_id("MPI_Request_free");
  return id;
}

/* Whether the request of `key` is a pending point-to-point request whose free is recorded (taken into *r). */
static int wl_free_takes(uintptr_t key, wl_req_t* r)
{
  int tracked = wl_on && wl_req_take(key, r);
  if (tracked && (r->coll >= 0 || r->unresolved || r->op < 0)) {
    wl_req_insert(r);
    tracked = 0;
  }
  return tracked;
}

/* After MPI_Request_free (C or Fortran) of the request of `key`: the wait of a tracked request r over [t0, now] (ok:
 * the call succeeded; else r stays pending), and the persistent template of `key` (if any) is gone. */
static void wl_freed(uintptr_t key, int tracked, int ok, wl_req_t* r, double t0, const void* ra)
{
  if (tracked && ok)
    wl_push(WL_WAIT, t0, wl_now(), r->peer, r->tag, wl_args[r->op].comm, 0.0, r->is_recv ? 1.0 : 0.0,
            wl_request_free_name(), wl_site(ra), 0);
  else if (tracked)
    wl_req_insert(r);
  wl_persist_t* p = key ? wl_persist_find(key) : NULL;
  if (p != NULL)
    *p = wl_persist[--wl_n_persist];
}

/* A pending point-to-point request the program frees (MPI_Request_free: MPI completes it in the background) is no
 * longer one a later wait of its partner and tag completes: recorded as a wait of it over the call (no time), named
 * after the call (the event table's `call`), so the matching takes it off the rank's pending requests and a capture
 * writes that wait (SMPI's replay has no free).  Other requests (inactive persistent, collective, a receive whose
 * source is still a wildcard, unknown) record nothing. */
int MPI_Request_free(MPI_Request* req)
{
  uintptr_t key = req ? (uintptr_t)*req : 0;
  wl_req_t r;
  int rc;
  if (wl_free_takes(key, &r)) {
    WL_BEGIN();
    rc = PMPI_Request_free(req);
    wl_freed(key, 1, rc == MPI_SUCCESS, &r, t0_, ra_);
  } else {
    rc = PMPI_Request_free(req);
    wl_freed(key, 0, 0, &r, 0.0, NULL);
  }
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

