/* waitlab_pmpi_f.c: Fortran bindings (mpif.h, use mpi) of persistent requests, completions, polls, probes,
 * MPI_Sendrecv_replace, MPI_Wtime and the v-collectives, recorded as their C wrappers record them.  SMPI's own
 * Fortran bindings call SMPI's C functions inside libsimgrid, out of the layer's reach: each wrapper calls SMPI's
 * binding (dlsym(RTLD_NEXT), WL_REAL), then records.
 * Fortran request handles are integers: their keys are wl_fkey(handle) (MPI_REQUEST_NULL, -1: key 0, no request);
 * indices are 1-based.
 * Part of waitlab's measurement layer: #included by waitlab_pmpi.c after waitlab_pmpi_coll.c (one translation unit,
 * so the static helpers and state of waitlab_pmpi.c are shared).  Not compiled on its own. */

/* The keys of Fortran requests reqs[0..count) (heap; a null request's is 0). */
static uintptr_t* wl_fkeys(int count, const int* reqs)
{
  uintptr_t* keys = wl_malloc(sizeof(uintptr_t) * (size_t)(count > 0 ? count : 1));
  for (int i = 0; i < count; i++)
    keys[i] = reqs[i] == MPI_FORTRAN_REQUEST_NULL ? 0 : wl_fkey(reqs[i]);
  return keys;
}

/* A Fortran statuses argument: the program's array, or (MPI_STATUSES_IGNORE) one of n statuses to free. */
static MPI_Status* wl_fstatuses(MPI_Status* statuses, int n, MPI_Status** own)
{
  int ignored = statuses == NULL || (const void*)statuses == (const void*)&mpi_statuses_ignore_;
  *own = ignored ? wl_malloc(sizeof(MPI_Status) * (size_t)(n > 0 ? n : 1)) : NULL;
  return ignored ? *own : statuses;
}

/* 0-based copies of the first n 1-based Fortran indices (heap). */
static int* wl_findices(int n, const int* indices)
{
  int* idx = wl_malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  for (int j = 0; j < n; j++)
    idx[j] = indices[j] - 1;
  return idx;
}

/* ---- point to point --------------------------------------------------------------------------------------------- */

typedef void (*wl_f_sendrecv_replace_t)(void*, int*, int*, int*, int*, int*, int*, int*, MPI_Status*, int*);

void mpi_sendrecv_replace_(void* buf, int* count, int* dt, int* dst, int* stag, int* src, int* rtag, int* comm,
                           MPI_Status* status, int* ierr)
{
  WL_REAL(real, wl_f_sendrecv_replace_t, "mpi_sendrecv_replace_");
  WL_BEGIN();
  WL_IN(WL_IN_BOTH, *src, *dst, *rtag, PMPI_Comm_f2c(*comm));
  MPI_Status own;
  MPI_Status* st = wl_fstatus_ignored(status) ? &own : status;
  real(buf, count, dt, dst, stag, src, rtag, comm, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS) {
    MPI_Datatype t = PMPI_Type_f2c(*dt);
    wl_sendrecv(t0_, ra_, *count, t, *dst, *stag, *count, t, *src, PMPI_Comm_f2c(*comm), st, wl_sendrecv_name());
  }
}

typedef void (*wl_f_probe_t)(int*, int*, int*, MPI_Status*, int*);
typedef void (*wl_f_iprobe_t)(int*, int*, int*, int*, MPI_Status*, int*);

void mpi_probe_(int* src, int* tag, int* comm, MPI_Status* status, int* ierr)
{
  WL_REAL(real, wl_f_probe_t, "mpi_probe_");
  MPI_Comm c = PMPI_Comm_f2c(*comm);
  WL_BEGIN_KEEP(*src != MPI_PROC_NULL && wl_poll_keeps_msg(c, *src, *tag));
  WL_IN(WL_IN_FROM, *src, 0, *tag, c);
  MPI_Status own;
  MPI_Status* st = wl_fstatus_ignored(status) ? &own : status;
  real(src, tag, comm, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS && *src != MPI_PROC_NULL)
    wl_poll_probe(t0_, wl_now(), c, *src, *tag, st, wl_site(ra_));
}

void mpi_iprobe_(int* src, int* tag, int* comm, int* flag, MPI_Status* status, int* ierr)
{
  WL_REAL(real, wl_f_iprobe_t, "mpi_iprobe_");
  MPI_Comm c = PMPI_Comm_f2c(*comm);
  WL_BEGIN_KEEP(*src != MPI_PROC_NULL && wl_poll_keeps_msg(c, *src, *tag));
  MPI_Status own;
  MPI_Status* st = wl_fstatus_ignored(status) ? &own : status;
  real(src, tag, comm, flag, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS && *src != MPI_PROC_NULL)
    wl_poll_probe(t0_, wl_now(), c, *src, *tag, *flag ? st : NULL, wl_site(ra_));
}

/* ---- persistent requests (SMPI's Fortran bindings keep a persistent request's handle until MPI_Request_free) ---- */

typedef void (*wl_f_init_req_t)(void*, int*, int*, int*, int*, int*, int*, int*);
typedef void (*wl_f_start_t)(int*, int*);
typedef void (*wl_f_startall_t)(int*, int*, int*);

/* MPI_Send_init, ..., MPI_Recv_init: the request's template, as the C wrappers keep it (peer: dst or src). */
#define WL_F_INIT(FNAME, CODE)                                                                                         \
  void FNAME(void* buf, int* count, int* dt, int* peer, int* tag, int* comm, int* req, int* ierr)                      \
  {                                                                                                                    \
    WL_REAL(real, wl_f_init_req_t, #FNAME);                                                                            \
    real(buf, count, dt, peer, tag, comm, req, ierr);                                                                  \
    if (wl_on && *ierr == MPI_SUCCESS && *peer != MPI_PROC_NULL && *req != MPI_FORTRAN_REQUEST_NULL)                   \
      wl_persist_add(wl_fkey(*req), CODE, *peer, *tag, PMPI_Comm_f2c(*comm), wl_bytes(*count, PMPI_Type_f2c(*dt)));   \
  }
WL_F_INIT(mpi_send_init_, WL_ISEND)
WL_F_INIT(mpi_ssend_init_, WL_ISSEND)
WL_F_INIT(mpi_rsend_init_, WL_ISEND)
WL_F_INIT(mpi_bsend_init_, WL_ISEND)
WL_F_INIT(mpi_recv_init_, WL_IRECV)

void mpi_start_(int* req, int* ierr)
{
  WL_REAL(real, wl_f_start_t, "mpi_start_");
  WL_BEGIN();
  real(req, ierr);
  if (wl_on && *ierr == MPI_SUCCESS && *req != MPI_FORTRAN_REQUEST_NULL)
    wl_started(wl_fkey(*req), t0_, wl_now(), wl_site(ra_));
}

void mpi_startall_(int* count, int* reqs, int* ierr)
{
  WL_REAL(real, wl_f_startall_t, "mpi_startall_");
  WL_BEGIN();
  real(count, reqs, ierr);
  if (wl_on && *ierr == MPI_SUCCESS) {
    double t1 = wl_now();
    for (int i = 0; i < *count; i++)
      if (reqs[i] != MPI_FORTRAN_REQUEST_NULL)
        wl_started(wl_fkey(reqs[i]), i ? t1 : t0_, t1, wl_site(ra_));
  }
}

/* MPI_Request_free, as in C: a pending point-to-point request's free is its wait; a persistent template is gone
 * (SMPI frees the Fortran handle, which a later request may get again). */
void mpi_request_free_(int* req, int* ierr)
{
  WL_REAL(real, wl_f_start_t, "mpi_request_free_");
  uintptr_t key = *req == MPI_FORTRAN_REQUEST_NULL ? 0 : wl_fkey(*req);
  wl_req_t r;
  if (wl_free_takes(key, &r)) {
    WL_BEGIN();
    real(req, ierr);
    wl_freed(key, 1, *ierr == MPI_SUCCESS, &r, t0_, ra_);
  } else {
    real(req, ierr);
    wl_freed(key, 0, 0, &r, 0.0, NULL);
  }
}

/* ---- MPI_Wtime ---------------------------------------------------------------------------------------------------
 * SMPI's mpi_wtime_ jumps to SMPI's MPI_Wtime inside libsimgrid, out of the layer's reach: the layer's C MPI_Wtime
 * instead (computation = "counted": the computation before it is charged; "none": the spin guard). */

double mpi_wtime_(void) { return MPI_Wtime(); }

/* ---- completions and polls -------------------------------------------------------------------------------------- */

typedef void (*wl_f_test_t)(int*, int*, MPI_Status*, int*);
typedef void (*wl_f_testany_t)(int*, int*, int*, int*, MPI_Status*, int*);
typedef void (*wl_f_testall_t)(int*, int*, int*, MPI_Status*, int*);
typedef void (*wl_f_some_t)(int*, int*, int*, int*, MPI_Status*, int*);
typedef void (*wl_f_waitany_t)(int*, int*, int*, MPI_Status*, int*);

void mpi_test_(int* req, int* flag, MPI_Status* status, int* ierr)
{
  WL_REAL(real, wl_f_test_t, "mpi_test_");
  uintptr_t key = *req == MPI_FORTRAN_REQUEST_NULL ? 0 : wl_fkey(*req);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(1, &key));
  MPI_Status own;
  MPI_Status* st = wl_fstatus_ignored(status) ? &own : status;
  real(req, flag, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS && key != 0) {
    if (*flag)
      wl_completed_one(key, st, wl_poll_take(t0_), ra_, -1);
    else
      wl_poll_reqs(t0_, wl_now(), 1, &key, wl_site(ra_));
  }
}

void mpi_testany_(int* count, int* reqs, int* index, int* flag, MPI_Status* status, int* ierr)
{
  WL_REAL(real, wl_f_testany_t, "mpi_testany_");
  uintptr_t* keys = wl_fkeys(*count, reqs);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(*count, keys));
  MPI_Status own;
  MPI_Status* st = wl_fstatus_ignored(status) ? &own : status;
  real(count, reqs, index, flag, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS) {
    if (*flag && *index != MPI_UNDEFINED && *index >= 1 && *index <= *count)
      wl_completed_one(keys[*index - 1], st, wl_poll_take(t0_), ra_, -1);
    else if (!*flag)
      wl_poll_reqs(t0_, wl_now(), *count, keys, wl_site(ra_));
  }
  free(keys);
}

void mpi_testall_(int* count, int* reqs, int* flag, MPI_Status* statuses, int* ierr)
{
  WL_REAL(real, wl_f_testall_t, "mpi_testall_");
  uintptr_t* keys = wl_fkeys(*count, reqs);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(*count, keys));
  MPI_Status* own;
  MPI_Status* st = wl_fstatuses(statuses, *count, &own);
  real(count, reqs, flag, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS) {
    if (*flag) {
      wl_completed(*count, keys, NULL, st, wl_poll_take(t0_), ra_);
    } else { /* the requests SMPI completed all the same (wl_nulled): Fortran's null handle */
      int* done = NULL;
      for (int j = 0; j < *count; j++)
        if (keys[j] != 0 && reqs[j] == MPI_FORTRAN_REQUEST_NULL) {
          if (done == NULL)
            done = wl_zeros(*count);
          done[j] = 1;
        }
      wl_testall_partial(*count, keys, done, st, t0_, ra_);
    }
  }
  free(keys);
  free(own);
}

/* The rest of MPI_Testsome (test = 1) and MPI_Waitsome (test = 0: its waits named MPI_Waitsome) after the wrapper's
 * WL_BEGIN_KEEP; frees keys. */
static void wl_f_some(wl_f_some_t real, int test, int* incount, int* reqs, int* outcount, int* indices,
                      MPI_Status* statuses, int* ierr, uintptr_t* keys, double t0, const void* ra)
{
  MPI_Status* own;
  MPI_Status* st = wl_fstatuses(statuses, *incount, &own);
  real(incount, reqs, outcount, indices, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS && *outcount != MPI_UNDEFINED) {
    if (*outcount > 0) {
      int* idx = wl_findices(*outcount, indices);
      wl_completed_each(*outcount, keys, idx, st, wl_poll_take(t0), ra, test ? -1 : wl_waitsome_name());
      free(idx);
    } else if (test) {
      wl_poll_reqs(t0, wl_now(), *incount, keys, wl_site(ra));
    }
  }
  free(keys);
  free(own);
}

void mpi_testsome_(int* incount, int* reqs, int* outcount, int* indices, MPI_Status* statuses, int* ierr)
{
  WL_REAL(real, wl_f_some_t, "mpi_testsome_");
  uintptr_t* keys = wl_fkeys(*incount, reqs);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(*incount, keys));
  wl_f_some(real, 1, incount, reqs, outcount, indices, statuses, ierr, keys, t0_, ra_);
}

void mpi_waitsome_(int* incount, int* reqs, int* outcount, int* indices, MPI_Status* statuses, int* ierr)
{
  WL_REAL(real, wl_f_some_t, "mpi_waitsome_");
  uintptr_t* keys = wl_fkeys(*incount, reqs);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(*incount, keys));
  wl_f_some(real, 0, incount, reqs, outcount, indices, statuses, ierr, keys, t0_, ra_);
}

void mpi_waitany_(int* count, int* reqs, int* index, MPI_Status* status, int* ierr)
{
  WL_REAL(real, wl_f_waitany_t, "mpi_waitany_");
  uintptr_t* keys = wl_fkeys(*count, reqs);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(*count, keys));
  MPI_Status own;
  MPI_Status* st = wl_fstatus_ignored(status) ? &own : status;
  real(count, reqs, index, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS && *index != MPI_UNDEFINED && *index >= 1 && *index <= *count)
    wl_completed_one(keys[*index - 1], st, wl_poll_take(t0_), ra_, wl_waitany_name());
  free(keys);
}

typedef void (*wl_f_get_status_t)(int*, int*, MPI_Status*, int*);

void mpi_request_get_status_(int* req, int* flag, MPI_Status* status, int* ierr)
{
  WL_REAL(real, wl_f_get_status_t, "mpi_request_get_status_");
  uintptr_t key = *req == MPI_FORTRAN_REQUEST_NULL ? 0 : wl_fkey(*req);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(1, &key));
  MPI_Status own;
  MPI_Status* st = wl_fstatus_ignored(status) ? &own : status;
  real(req, flag, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS && key != 0)
    wl_poll_reqs(t0_, wl_now(), 1, &key, wl_site(ra_));
}

/* ---- v-collectives ---------------------------------------------------------------------------------------------- */

typedef void (*wl_f_rsb_t)(void*, void*, int*, int*, int*, int*, int*);
typedef void (*wl_f_gatherv_t)(void*, int*, int*, void*, int*, int*, int*, int*, int*, int*);
typedef void (*wl_f_allgatherv_t)(void*, int*, int*, void*, int*, int*, int*, int*, int*);
typedef void (*wl_f_a2aw_t)(void*, int*, int*, int*, void*, int*, int*, int*, int*, int*);

void mpi_reduce_scatter_(void* sbuf, void* rbuf, int* rcounts, int* dt, int* op, int* comm, int* ierr)
{
  WL_REAL(real, wl_f_rsb_t, "mpi_reduce_scatter_");
  WL_BEGIN();
  real(sbuf, rbuf, rcounts, dt, op, comm, ierr);
  if (wl_on && *ierr == MPI_SUCCESS)
    wl_reduce_scatter(t0_, ra_, PMPI_Comm_f2c(*comm), rcounts, PMPI_Type_f2c(*dt));
}

void mpi_reduce_scatter_block_(void* sbuf, void* rbuf, int* rcount, int* dt, int* op, int* comm, int* ierr)
{
  WL_REAL(real, wl_f_rsb_t, "mpi_reduce_scatter_block_");
  WL_BEGIN();
  real(sbuf, rbuf, rcount, dt, op, comm, ierr);
  if (wl_on && *ierr == MPI_SUCCESS) {
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    int* counts = wl_equal_counts(c, *rcount);
    wl_reduce_scatter(t0_, ra_, c, counts, PMPI_Type_f2c(*dt));
    free(counts);
  }
}

void mpi_gatherv_(void* sbuf, int* scount, int* stype, void* rbuf, int* rcounts, int* displs, int* rtype, int* root,
                  int* comm, int* ierr)
{
  WL_REAL(real, wl_f_gatherv_t, "mpi_gatherv_");
  WL_BEGIN();
  real(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm, ierr);
  if (wl_on && *ierr == MPI_SUCCESS) {
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    int at_root = wl_is_root(c, *root);
    MPI_Datatype st = PMPI_Type_f2c(*stype), rt = PMPI_Type_f2c(*rtype);
    double sent = at_root && wl_in_place(sbuf) ? wl_count_at(rcounts, *root, rt) : wl_bytes(*scount, st);
    wl_vcoll(WL_GATHERV, t0_, ra_, wl_root(c, *root), c, NULL, st, at_root ? rcounts : NULL, rt, sent, 0.0);
  }
}

void mpi_scatterv_(void* sbuf, int* scounts, int* displs, int* stype, void* rbuf, int* rcount, int* rtype, int* root,
                   int* comm, int* ierr)
{
  WL_REAL(real, wl_f_gatherv_t, "mpi_scatterv_");
  WL_BEGIN();
  real(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm, ierr);
  if (wl_on && *ierr == MPI_SUCCESS) {
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    int at_root = wl_is_root(c, *root);
    MPI_Datatype st = PMPI_Type_f2c(*stype), rt = PMPI_Type_f2c(*rtype);
    double got = at_root && wl_in_place(rbuf) ? wl_count_at(scounts, *root, st) : wl_bytes(*rcount, rt);
    wl_vcoll(WL_SCATTERV, t0_, ra_, wl_root(c, *root), c, at_root ? scounts : NULL, st, NULL, rt, 0.0, got);
  }
}

void mpi_allgatherv_(void* sbuf, int* scount, int* stype, void* rbuf, int* rcounts, int* displs, int* rtype,
                     int* comm, int* ierr)
{
  WL_REAL(real, wl_f_allgatherv_t, "mpi_allgatherv_");
  WL_BEGIN();
  real(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, ierr);
  if (wl_on && *ierr == MPI_SUCCESS)
    wl_allgatherv(t0_, ra_, PMPI_Comm_f2c(*comm), sbuf, *scount, PMPI_Type_f2c(*stype), rcounts,
                  PMPI_Type_f2c(*rtype));
}

void mpi_alltoallw_(void* sbuf, int* scounts, int* sdispls, int* stypes, void* rbuf, int* rcounts, int* rdispls,
                    int* rtypes, int* comm, int* ierr)
{
  WL_REAL(real, wl_f_a2aw_t, "mpi_alltoallw_");
  WL_BEGIN();
  real(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, ierr);
  if (wl_on && *ierr == MPI_SUCCESS) {
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    int n;
    PMPI_Comm_size(c, &n);
    int in_place = wl_in_place(sbuf);
    MPI_Datatype* st = wl_malloc(sizeof(MPI_Datatype) * (size_t)(n > 0 ? n : 1));
    MPI_Datatype* rt = wl_malloc(sizeof(MPI_Datatype) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) {
      rt[i] = PMPI_Type_f2c(rtypes[i]);
      st[i] = in_place ? rt[i] : PMPI_Type_f2c(stypes[i]);
    }
    long long* sb = wl_count_bytes(n, in_place ? rcounts : scounts, MPI_DATATYPE_NULL, st);
    long long* rb = wl_count_bytes(n, rcounts, MPI_DATATYPE_NULL, rt);
    wl_vcoll_bytes(WL_ALLTOALLV, t0_, ra_, -1, c, n, sb, rb, 0.0, 0.0);
    free(sb);
    free(rb);
    free(st);
    free(rt);
  }
}

/* ---- nonblocking collectives with per-member counts ------------------------------------------------------------- */

typedef void (*wl_f_irs_t)(void*, void*, int*, int*, int*, int*, int*, int*);

/* MPI_Ireduce_scatter (block = 0: rcounts per member) and MPI_Ireduce_scatter_block (block = 1: one count), recorded
 * as their C wrappers are: a `reducescatter` at the call that completes the request. */
static void wl_f_ireduce_scatter(wl_f_irs_t real, int block, void* sbuf, void* rbuf, int* rcounts, int* dt, int* op,
                                 int* comm, int* req, int* ierr)
{
  double tp_ = wl_post_clock();
  real(sbuf, rbuf, rcounts, dt, op, comm, req, ierr);
  if (wl_on && *ierr == MPI_SUCCESS) {
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    int n;
    PMPI_Comm_size(c, &n);
    int* counts = block ? wl_equal_counts(c, *rcounts) : NULL;
    long long* rb = wl_count_bytes(n, block ? counts : rcounts, PMPI_Type_f2c(*dt), NULL);
    wl_coll_add_vec(wl_fkey(*req), WL_REDUCESCATTER, c, rb, tp_, wl_now());
    free(rb);
    free(counts);
  }
}

void mpi_ireduce_scatter_(void* sbuf, void* rbuf, int* rcounts, int* dt, int* op, int* comm, int* req, int* ierr)
{
  WL_REAL(real, wl_f_irs_t, "mpi_ireduce_scatter_");
  wl_f_ireduce_scatter(real, 0, sbuf, rbuf, rcounts, dt, op, comm, req, ierr);
}

void mpi_ireduce_scatter_block_(void* sbuf, void* rbuf, int* rcount, int* dt, int* op, int* comm, int* req,
                                int* ierr)
{
  WL_REAL(real, wl_f_irs_t, "mpi_ireduce_scatter_block_");
  wl_f_ireduce_scatter(real, 1, sbuf, rbuf, rcount, dt, op, comm, req, ierr);
}

/* The nonblocking v-collectives are refused in Fortran as in C (WL_REFUSE). */
typedef void (*wl_f_v10_t)(void*, void*, void*, void*, void*, void*, void*, void*, void*, void*);
typedef void (*wl_f_v11_t)(void*, void*, void*, void*, void*, void*, void*, void*, void*, void*, void*);

#define WL_F_REFUSE11(FNAME, CNAME)                                                                                    \
  void FNAME(void* a, void* b, void* c, void* d, void* e, void* f, void* g, void* h, void* i, void* j, void* k)       \
  {                                                                                                                    \
    if (wl_on)                                                                                                         \
      WL_REFUSE(CNAME);                                                                                                \
    WL_REAL(real, wl_f_v11_t, #FNAME);                                                                                 \
    real(a, b, c, d, e, f, g, h, i, j, k);                                                                             \
  }
WL_F_REFUSE11(mpi_igatherv_, "MPI_Igatherv")
WL_F_REFUSE11(mpi_iscatterv_, "MPI_Iscatterv")
WL_F_REFUSE11(mpi_ialltoallv_, "MPI_Ialltoallv")
WL_F_REFUSE11(mpi_ialltoallw_, "MPI_Ialltoallw")

void mpi_iallgatherv_(void* a, void* b, void* c, void* d, void* e, void* f, void* g, void* h, void* i, void* j)
{
  if (wl_on)
    WL_REFUSE("MPI_Iallgatherv");
  WL_REAL(real, wl_f_v10_t, "mpi_iallgatherv_");
  real(a, b, c, d, e, f, g, h, i, j);
}
