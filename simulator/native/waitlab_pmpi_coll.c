/* waitlab_pmpi_coll.c: collectives (blocking, v-collectives, nonblocking completion) and Fortran bindings.
 * Part of waitlab's measurement layer: #included by waitlab_pmpi.c (one translation unit, so the static
 * helpers and state of waitlab_pmpi.c are shared).  Not compiled on its own. */

/* ---- collectives ---------------------------------------------------------------------------------------------- */

/* ---- MPI_IN_PLACE ------------------------------------------------------------------------------------------------
 * With MPI_IN_PLACE, MPI ignores the count and datatype that go with that buffer (a program may pass 0 and
 * MPI_DATATYPE_NULL) and takes the rank's own block from the other buffer.  Every record holds what the same call
 * without MPI_IN_PLACE would (the byte rules count the rank's block to itself, models/byte_accounting.py; Score-P
 * leaves it out with MPI_IN_PLACE), so the capture's count checks (simulator/replayable.py, which compare a gatherv or
 * scatterv root's own block too) and the replay see the counts MPI matched:
 *   allgather, alltoall   sends: rcount x size(rtype) per rank;  allgatherv: rcounts[me] x size(rtype);
 *   alltoallv (alltoallw) sends: rcounts[i] x size(rtype) to rank i;
 *   gather at the root    sends: rcount x size(rtype);  gatherv at the root: rcounts[root] x size(rtype);
 *   scatter at the root   receives (rbuf in place): scount x size(stype);  scatterv: scounts[root] x size(stype).
 * The reductions (reduce, allreduce, reduce_scatter(_block), scan, exscan) keep their count and datatype with
 * MPI_IN_PLACE: their records need nothing.  The ignored datatype never reaches PMPI_Type_size. */

/* Fortran's MPI_IN_PLACE: mpif.h declares it `external`, so a Fortran program passes this symbol's address. */
extern int mpi_in_place_;

/* Whether buf is MPI_IN_PLACE, from C or Fortran (either sentinel is never a real buffer of the other language). */
static int wl_in_place(const void* buf) { return buf == MPI_IN_PLACE || buf == (const void*)&mpi_in_place_; }

/* Whether the calling rank is rank root of comm. */
static int wl_is_root(MPI_Comm comm, int root)
{
  int me;
  PMPI_Comm_rank(comm, &me);
  return me == root;
}

/* Bytes of element i of counts (counts[i] elements of dt); 0 without counts. */
static double wl_count_at(const int* counts, int i, MPI_Datatype dt)
{
  return counts == NULL ? 0.0 : wl_bytes(counts[i], dt);
}

/* The generated wrappers (waitlab_wrappers.inc, from simulator/layer_wrappers.py) record a collective with
 *   WL_COLL(WL_<ACTION>, peer, comm, wl_bytes(scount, stype), wl_bytes(rcount, rtype))
 * or, nonblocking, WL_COLL_ADD(key, WL_<ACTION>, root, comm, <the same two bytes>), in a scope holding the
 * call's arguments by their MPI names (sbuf, scount, stype, rbuf, rcount, rtype, root, comm; Fortran wrappers
 * convert theirs to those C names first).  WL_IN_PLACE_<code>(v, v2) gives the two bytes to record: the exchanges
 * and rooted collectives replace, with MPI_IN_PLACE, the side MPI ignores (see above); the others record v, v2.  It
 * expands to two arguments of wl_push / wl_coll_add (functions).  WL_COLL and WL_COLL_ADD need code spelled as a
 * WL_<ACTION> name (a code in a variable does not compile: there is no WL_IN_PLACE_<variable>). */
#define WL_IN_PLACE_WL_BARRIER(v, v2) (v), (v2)
#define WL_IN_PLACE_WL_BCAST(v, v2) (v), (v2)
#define WL_IN_PLACE_WL_REDUCE(v, v2) (v), (v2)
#define WL_IN_PLACE_WL_ALLREDUCE(v, v2) (v), (v2)
#define WL_IN_PLACE_WL_SCAN(v, v2) (v), (v2)
#define WL_IN_PLACE_WL_EXSCAN(v, v2) (v), (v2)
#define WL_IN_PLACE_WL_ALLTOALL(v, v2) (wl_in_place(sbuf) ? wl_bytes(rcount, rtype) : (v)), (v2)
#define WL_IN_PLACE_WL_ALLGATHER(v, v2) (wl_in_place(sbuf) ? wl_bytes(rcount, rtype) : (v)), (v2)
#define WL_IN_PLACE_WL_GATHER(v, v2)                                                                                   \
  (wl_in_place(sbuf) && wl_is_root(comm, root) ? wl_bytes(rcount, rtype) : (v)), (v2)
#define WL_IN_PLACE_WL_SCATTER(v, v2)                                                                                  \
  (v), (wl_in_place(rbuf) && wl_is_root(comm, root) ? wl_bytes(scount, stype) : (v2))

#define WL_COLL(code, peer, comm, v, v2)                                                                               \
  wl_push((code), t0_, wl_now(), (peer), 0, wl_comm_id(comm), WL_IN_PLACE_##code(v, v2), -1, wl_site(ra_), 0)

/* A nonblocking collective's record (wl_coll_add, waitlab_pmpi_comms.c) through the same WL_IN_PLACE_<code>: from its
 * start (tp_) to now; completed by the wait of its request key. */
#define WL_COLL_ADD(key, code, peer, comm, v, v2)                                                                      \
  wl_coll_add((key), (code), (peer), wl_comm_id(comm), WL_IN_PLACE_##code(v, v2), tp_, wl_now())

/* Bytes of counts[i] elements of types[i] (types NULL: of type dt) for i < n, on the heap; NULL counts: NULL. */
static long long* wl_count_bytes(int n, const int* counts, MPI_Datatype dt, const MPI_Datatype* types)
{
  if (counts == NULL)
    return NULL;
  long long* b = wl_malloc(sizeof(long long) * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++) {
    MPI_Datatype t = types ? types[i] : dt;
    int size = 0;
    if (t != MPI_DATATYPE_NULL)
      PMPI_Type_size(t, &size);
    b[i] = (long long)counts[i] * size;
  }
  return b;
}

/* A v-collective record with per-member bytes sbytes/rbytes (NULL: the scalar sscalar/rscalar instead). */
static int64_t wl_vcoll_bytes(int code, double t0, const void* ra, int peer, MPI_Comm comm, int n,
                              const long long* sbytes, const long long* rbytes, double sscalar, double rscalar)
{
  int64_t op = wl_push(code, t0, wl_now(), peer, 0, wl_comm_id(comm), 0.0, 0.0, -1, wl_site(ra), 0);
  double ssum, rsum;
  wl_vector_bytes(op, n, sbytes, rbytes, &ssum, &rsum);
  wl_args[op].value = sbytes ? ssum : sscalar;
  wl_args[op].value2 = rbytes ? rsum : rscalar;
  return op;
}

static int64_t wl_vcoll(int code, double t0, const void* ra, int peer, MPI_Comm comm, const int* scounts,
                        MPI_Datatype stype, const int* rcounts, MPI_Datatype rtype, double sscalar, double rscalar)
{
  int n;
  PMPI_Comm_size(comm, &n);
  long long* sb = wl_count_bytes(n, scounts, stype, NULL);
  long long* rb = wl_count_bytes(n, rcounts, rtype, NULL);
  int64_t op = wl_vcoll_bytes(code, t0, ra, peer, comm, n, sb, rb, sscalar, rscalar);
  free(sb);
  free(rb);
  return op;
}

/* An allgatherv record: its one send (MPI_IN_PLACE: its own block, rcounts[me] x size(rtype)) and the receive
 * counts of every member. */
static void wl_allgatherv(double t0, const void* ra, MPI_Comm comm, const void* sbuf, int scount, MPI_Datatype stype,
                          const int* rcounts, MPI_Datatype rtype)
{
  int me;
  PMPI_Comm_rank(comm, &me);
  double sent = wl_in_place(sbuf) ? wl_count_at(rcounts, me, rtype) : wl_bytes(scount, stype);
  wl_vcoll(WL_ALLGATHERV, t0, ra, -1, comm, NULL, stype, rcounts, rtype, sent, 0.0);
}

int MPI_Alltoallv(const void* sbuf, const int* scounts, const int* sdispls, MPI_Datatype stype, void* rbuf,
                  const int* rcounts, const int* rdispls, MPI_Datatype rtype, MPI_Comm comm)
{
  WL_BEGIN();
  int rc = PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm);
  if (wl_on && rc == MPI_SUCCESS) {
    int in_place = wl_in_place(sbuf); /* sends what it receives */
    wl_vcoll(WL_ALLTOALLV, t0_, ra_, -1, comm, in_place ? rcounts : scounts, in_place ? rtype : stype, rcounts, rtype,
             0.0, 0.0);
  }
  return rc;
}

int MPI_Gatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int* rcounts, const int* displs,
                MPI_Datatype rtype, int root, MPI_Comm comm)
{
  WL_BEGIN();
  WL_IN(WL_IN_ROOT, root, 0, 0, comm);
  int rc = PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm);
  if (wl_on && rc == MPI_SUCCESS) {
    int at_root = wl_is_root(comm, root);
    double sent = at_root && wl_in_place(sbuf) ? wl_count_at(rcounts, root, rtype) : wl_bytes(scount, stype);
    wl_vcoll(WL_GATHERV, t0_, ra_, wl_root(comm, root), comm, NULL, stype, at_root ? rcounts : NULL, rtype, sent, 0.0);
  }
  return rc;
}

int MPI_Scatterv(const void* sbuf, const int* scounts, const int* displs, MPI_Datatype stype, void* rbuf, int rcount,
                 MPI_Datatype rtype, int root, MPI_Comm comm)
{
  WL_BEGIN();
  WL_IN(WL_IN_ROOT, root, 0, 0, comm);
  int rc = PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm);
  if (wl_on && rc == MPI_SUCCESS) {
    int at_root = wl_is_root(comm, root);
    double got = at_root && wl_in_place(rbuf) ? wl_count_at(scounts, root, stype) : wl_bytes(rcount, rtype);
    wl_vcoll(WL_SCATTERV, t0_, ra_, wl_root(comm, root), comm, at_root ? scounts : NULL, stype, NULL, rtype, 0.0, got);
  }
  return rc;
}

int MPI_Allgatherv(const void* sbuf, int scount, MPI_Datatype stype, void* rbuf, const int* rcounts,
                   const int* displs, MPI_Datatype rtype, MPI_Comm comm)
{
  WL_BEGIN();
  int rc = PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm);
  if (wl_on && rc == MPI_SUCCESS)
    wl_allgatherv(t0_, ra_, comm, sbuf, scount, stype, rcounts, rtype);
  return rc;
}

/* A reduce-scatter record: vocabulary value = bytes of the whole reduced vector (sum of rcounts), value2 = flops
 * (not measured); the per-member counts as a v-collective's receive counts. */
static void wl_reduce_scatter(double t0, const void* ra, MPI_Comm comm, const int* rcounts, MPI_Datatype dt)
{
  int64_t op = wl_vcoll(WL_REDUCESCATTER, t0, ra, -1, comm, NULL, dt, rcounts, dt, 0.0, 0.0);
  wl_args[op].value = wl_args[op].value2;
  wl_args[op].value2 = 0.0;
}

int MPI_Reduce_scatter(const void* sbuf, void* rbuf, const int* rcounts, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
  WL_BEGIN();
  int rc = PMPI_Reduce_scatter(sbuf, rbuf, rcounts, dt, op, comm);
  if (wl_on && rc == MPI_SUCCESS)
    wl_reduce_scatter(t0_, ra_, comm, rcounts, dt);
  return rc;
}

/* rcount of every member of comm (heap). */
static int* wl_equal_counts(MPI_Comm comm, int rcount)
{
  int n;
  PMPI_Comm_size(comm, &n);
  int* counts = wl_malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  for (int i = 0; i < n; i++)
    counts[i] = rcount;
  return counts;
}

/* MPI_Reduce_scatter_block: a reduce-scatter whose members all receive rcount elements. */
int MPI_Reduce_scatter_block(const void* sbuf, void* rbuf, int rcount, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
  WL_BEGIN();
  int rc = PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm);
  if (wl_on && rc == MPI_SUCCESS) {
    int* counts = wl_equal_counts(comm, rcount);
    wl_reduce_scatter(t0_, ra_, comm, counts, dt);
    free(counts);
  }
  return rc;
}

/* MPI_Alltoallw: an alltoallv whose per-peer bytes come from each peer's datatype (MPI_IN_PLACE: sends what it
 * receives). */
int MPI_Alltoallw(const void* sbuf, const int* scounts, const int* sdispls, const MPI_Datatype* stypes, void* rbuf,
                  const int* rcounts, const int* rdispls, const MPI_Datatype* rtypes, MPI_Comm comm)
{
  WL_BEGIN();
  int rc = PMPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm);
  if (wl_on && rc == MPI_SUCCESS) {
    int n;
    PMPI_Comm_size(comm, &n);
    int in_place = wl_in_place(sbuf);
    long long* sb = wl_count_bytes(n, in_place ? rcounts : scounts, MPI_DATATYPE_NULL, in_place ? rtypes : stypes);
    long long* rb = wl_count_bytes(n, rcounts, MPI_DATATYPE_NULL, rtypes);
    wl_vcoll_bytes(WL_ALLTOALLV, t0_, ra_, -1, comm, n, sb, rb, 0.0, 0.0);
    free(sb);
    free(rb);
  }
  return rc;
}

/* ---- nonblocking collectives: the generated wrappers record them as their blocking twin in the call that completes
 * them (wl_coll_add, wl_record_completion); nonblocking v-collectives are refused ---------------------------------- */

/* MPI_Ibarrier with barrier semantics.  SMPI 3.32's Ibarrier lets a rank's MPI_Wait return before the last rank
 * entered the Ibarrier (4 ranks entering at 0, 0.5, 1.0, 1.5 s left at 1.5, 0.5, 1.0, 1.5 s: an impossible
 * timeline, 1.5 s of barrier wait instead of 3.0).  A nonblocking allreduce of one byte needs every rank's
 * contribution before any rank's request completes, which is exactly a barrier; SMPI's Iallreduce honours it
 * (the same ranks leave at 1.5 s).  The generated C wrapper MPI_Ibarrier (waitlab_wrappers.inc, included after
 * this file) calls PMPI_Ibarrier, redirected here; it still records the call as a barrier.  The buffers are
 * per-call heap bytes (a request may outlive the caller's frame): one byte per call, never freed (at most one
 * per Ibarrier a program makes). */
static int wl_ibarrier(MPI_Comm comm, MPI_Request* req)
{
  char* bytes = calloc(2, 1);
  if (bytes == NULL)
    return PMPI_Ibarrier(comm, req);
  return PMPI_Iallreduce(bytes, bytes + 1, 1, MPI_CHAR, MPI_MAX, comm, req);
}
#define PMPI_Ibarrier wl_ibarrier

/* Fortran's mpi_ibarrier through the same path: SMPI's own Fortran binding would call SMPI's MPI_Ibarrier inside
 * libsimgrid, where the layer cannot redirect it.  The generated Fortran wrapper mpi_ibarrier_ calls this instead of
 * SMPI's binding (layer_wrappers.FORTRAN_VIA); the program gets the C request's Fortran handle, as from SMPI's
 * binding (smpi_f77_coll.cpp: MPI_Ibarrier, then req->c2f()). */
static void wl_f_ibarrier(int* comm_f, int* req_f, int* ierr)
{
  MPI_Request req = MPI_REQUEST_NULL;
  *ierr = wl_ibarrier(PMPI_Comm_f2c(*comm_f), &req);
  if (*ierr == MPI_SUCCESS)
    *req_f = PMPI_Request_c2f(req);
}

/* Nonblocking reduce-scatters: recorded as `reducescatter` by the call that completes them, like the other
 * nonblocking collectives (its times: the wait is booked to the collective's pattern), with their per-member counts
 * kept until then.  The replay has no nonblocking reduce-scatter: a capture replays it blocking at its completion. */
int MPI_Ireduce_scatter(const void* sbuf, void* rbuf, const int* rcounts, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                        MPI_Request* req)
{
  double tp_ = wl_post_clock();
  int rc = PMPI_Ireduce_scatter(sbuf, rbuf, rcounts, dt, op, comm, req);
  if (wl_on && rc == MPI_SUCCESS) {
    int n;
    PMPI_Comm_size(comm, &n);
    long long* rb = wl_count_bytes(n, rcounts, dt, NULL);
    wl_coll_add_vec((uintptr_t)*req, WL_REDUCESCATTER, comm, rb, tp_, wl_now());
    free(rb);
  }
  return rc;
}

int MPI_Ireduce_scatter_block(const void* sbuf, void* rbuf, int rcount, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                              MPI_Request* req)
{
  double tp_ = wl_post_clock();
  int rc = PMPI_Ireduce_scatter_block(sbuf, rbuf, rcount, dt, op, comm, req);
  if (wl_on && rc == MPI_SUCCESS) {
    int n;
    PMPI_Comm_size(comm, &n);
    int* counts = wl_equal_counts(comm, rcount);
    long long* rb = wl_count_bytes(n, counts, dt, NULL);
    wl_coll_add_vec((uintptr_t)*req, WL_REDUCESCATTER, comm, rb, tp_, wl_now());
    free(rb);
    free(counts);
  }
  return rc;
}

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

int MPI_Ialltoallw(const void* a, const int* b, const int* c, const MPI_Datatype* d, void* e, const int* f,
                   const int* g, const MPI_Datatype* h, MPI_Comm i, MPI_Request* j)
{
  if (wl_on)
    WL_REFUSE("MPI_Ialltoallw");
  return PMPI_Ialltoallw(a, b, c, d, e, f, g, h, i, j);
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
  if (wl_on) {
    wl_regions_closed();
    wl_run_items(INT64_MAX, 0);
  }
  real(ierr);
  if (wl_on && *ierr == MPI_SUCCESS)
    wl_finish(t0_, wl_now(), ra_);
}

typedef void (*wl_f_isend_t)(void*, int*, int*, int*, int*, int*, int*, int*);
typedef void (*wl_f_recv_t)(void*, int*, int*, int*, int*, int*, MPI_Status*, int*);

void mpi_recv_(void* buf, int* count, int* dt, int* src, int* tag, int* comm, MPI_Status* status, int* ierr)
{
  WL_REAL(real, wl_f_recv_t, "mpi_recv_");
  MPI_Comm c = PMPI_Comm_f2c(*comm);
  WL_BEGIN_KEEP(*src != MPI_PROC_NULL && wl_poll_keeps_msg(c, *src, *tag));
  WL_IN(WL_IN_FROM, *src, 0, *tag, c);
  MPI_Status own;
  MPI_Status* st = wl_fstatus_ignored(status) ? &own : status;
  real(buf, count, dt, src, tag, comm, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS && *src != MPI_PROC_NULL) {
    wl_push(WL_RECV, wl_poll_take(t0_), wl_now(), wl_world(c, st->MPI_SOURCE), st->MPI_TAG, wl_p2p_comm_id(c),
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
    int64_t op = wl_push(WL_IRECV, t0_, wl_now(), peer, *tag, wl_p2p_comm_id(c), wl_bytes(*count, PMPI_Type_f2c(*dt)),
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
  WL_IN(WL_IN_BOTH, *src, *dst, *rtag, PMPI_Comm_f2c(*comm));
  MPI_Status own;
  MPI_Status* st = wl_fstatus_ignored(status) ? &own : status;
  real(sbuf, scount, stype, dst, stag, rbuf, rcount, rtype, src, rtag, comm, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS)
    wl_sendrecv(t0_, ra_, *scount, PMPI_Type_f2c(*stype), *dst, *stag, *rcount, PMPI_Type_f2c(*rtype), *src,
                PMPI_Comm_f2c(*comm), st, wl_sendrecv_name());
}

typedef void (*wl_f_wait_t)(int*, MPI_Status*, int*);
typedef void (*wl_f_waitall_t)(int*, int*, MPI_Status*, int*);

void mpi_wait_(int* req, MPI_Status* status, int* ierr)
{
  WL_REAL(real, wl_f_wait_t, "mpi_wait_");
  uintptr_t key = wl_fkey(*req);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(1, &key));
  MPI_Status own;
  MPI_Status* st = wl_fstatus_ignored(status) ? &own : status;
  real(req, st, ierr);
  if (wl_on && *ierr == MPI_SUCCESS)
    wl_completed_one(key, st, wl_poll_take(t0_), ra_, -1);
}

void mpi_waitall_(int* count, int* reqs, MPI_Status* statuses, int* ierr)
{
  WL_REAL(real, wl_f_waitall_t, "mpi_waitall_");
  int n = *count > 0 ? *count : 1;
  uintptr_t* keys = wl_malloc(sizeof(uintptr_t) * (size_t)n);
  for (int i = 0; i < *count; i++)
    keys[i] = wl_fkey(reqs[i]);
  WL_BEGIN_KEEP(wl_poll_keeps_reqs(*count, keys));
  int ignored = statuses == NULL || (const void*)statuses == (const void*)&mpi_statuses_ignore_;
  MPI_Status* own = ignored ? wl_malloc(sizeof(MPI_Status) * (size_t)n) : NULL;
  real(count, reqs, own ? own : statuses, ierr);
  if (wl_on && *ierr == MPI_SUCCESS)
    wl_completed(*count, keys, NULL, own ? own : statuses, wl_poll_take(t0_), ra_);
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
  if (wl_on && *ierr == MPI_SUCCESS) {
    MPI_Datatype rt = PMPI_Type_f2c(*rtype);
    int in_place = wl_in_place(sbuf); /* sends what it receives */
    wl_vcoll(WL_ALLTOALLV, t0_, ra_, -1, PMPI_Comm_f2c(*comm), in_place ? rcounts : scounts,
             in_place ? rt : PMPI_Type_f2c(*stype), rcounts, rt, 0.0, 0.0);
  }
}

