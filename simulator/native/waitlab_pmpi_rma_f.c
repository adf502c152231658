/* waitlab measurement layer: Fortran bindings of one-sided communication (MPI RMA).
 *
 * #included at the end of waitlab_pmpi_rma.c.  SMPI loads programs with RTLD_DEEPBIND, so its Fortran bindings
 * (smpi_f77.cpp) call SimGrid's own C functions, not the layer's: like the point-to-point Fortran wrappers of
 * waitlab_pmpi.c, these wrap SMPI's Fortran bindings (found with dlsym(RTLD_NEXT), WL_REAL) and record the call
 * with the same helpers as the C wrappers.  Signatures are those of SimGrid 3.32's smpi_f77.cpp (including its
 * by-value `assert` of mpi_win_post_/mpi_win_start_).
 */

typedef void (*wl_f_win_t)(int*, int*);                 /* (win, ierr) */
typedef void (*wl_f_win_int_t)(int*, int*, int*);       /* (int, win, ierr) */
typedef void (*wl_f_win_group_t)(int*, int, int*, int*); /* (group, assert, win, ierr) */
typedef void (*wl_f_win_lock_t)(int*, int*, int*, int*, int*);
typedef void (*wl_f_win_create_t)(int*, MPI_Aint*, int*, int*, int*, int*, int*);
typedef void (*wl_f_win_allocate_t)(MPI_Aint*, int*, int*, int*, void*, int*, int*);
typedef void (*wl_f_rma_t)(int*, int*, int*, int*, MPI_Aint*, int*, int*, int*, int*);
typedef void (*wl_f_acc_t)(int*, int*, int*, int*, MPI_Aint*, int*, int*, int*, int*, int*);

void mpi_win_create_(int* base, MPI_Aint* size, int* disp_unit, int* info, int* comm, int* win, int* ierr)
{
  WL_REAL(real, wl_f_win_create_t, "mpi_win_create_");
  WL_RMA_BEGIN();
  real(base, size, disp_unit, info, comm, win, ierr);
  if (wl_on && *ierr == MPI_SUCCESS)
    wl_win_add(PMPI_Win_f2c(*win), PMPI_Comm_f2c(*comm), t0_, ra_, (double)*size, *disp_unit);
}

void mpi_win_allocate_(MPI_Aint* size, int* disp_unit, int* info, int* comm, void* base, int* win, int* ierr)
{
  WL_REAL(real, wl_f_win_allocate_t, "mpi_win_allocate_");
  WL_RMA_BEGIN();
  real(size, disp_unit, info, comm, base, win, ierr);
  if (wl_on && *ierr == MPI_SUCCESS)
    wl_win_add(PMPI_Win_f2c(*win), PMPI_Comm_f2c(*comm), t0_, ra_, (double)*size, *disp_unit);
}

void mpi_win_free_(int* win, int* ierr)
{
  WL_REAL(real, wl_f_win_t, "mpi_win_free_");
  WL_RMA_BEGIN();
  wl_win_t* w = wl_win_find(PMPI_Win_f2c(*win));
  if (w != NULL)
    wl_ctl_free(w); /* the hidden window of the one-sided protocol (waitlab_pmpi_rma_mv2.c; unused from Fortran) */
  real(win, ierr);
  if (wl_on && *ierr == MPI_SUCCESS && w != NULL) {
    wl_push(WL_WIN_FREE, t0_, wl_now(), -1, w->id, w->comm, 0.0, 0.0, -1, wl_site(ra_), 0);
    free(w->world);
    w->world = NULL;
  }
}

#define WL_F_WIN(fname, sym, code)                                                                                     \
  void fname(int* win, int* ierr)                                                                                      \
  {                                                                                                                    \
    WL_REAL(real, wl_f_win_t, sym);                                                                                    \
    WL_RMA_BEGIN();                                                                                                    \
    MPI_Win w = PMPI_Win_f2c(*win);                                                                                    \
    wl_mv2_pre(code, w, -1, 0.0);                                                                                      \
    real(win, ierr);                                                                                                   \
    if (*ierr == MPI_SUCCESS)                                                                                          \
      wl_mv2_post(code, w, -1, MPI_GROUP_NULL, 0.0);                                                                   \
    if (*ierr == MPI_SUCCESS)                                                                                          \
      wl_rma(code, w, -1, 0.0, 0.0, t0_, ra_);                                                                         \
  }
WL_F_WIN(mpi_win_complete_, "mpi_win_complete_", WL_WIN_COMPLETE)
WL_F_WIN(mpi_win_wait_, "mpi_win_wait_", WL_WIN_WAIT)
WL_F_WIN(mpi_win_unlock_all_, "mpi_win_unlock_all_", WL_WIN_UNLOCK_ALL)
WL_F_WIN(mpi_win_flush_all_, "mpi_win_flush_all_", WL_WIN_FLUSH)
WL_F_WIN(mpi_win_flush_local_all_, "mpi_win_flush_local_all_", WL_WIN_FLUSH_LOCAL)

/* (int, win): the int is the fence's assert (recorded in value2) or a target rank */
#define WL_F_WIN_INT(fname, sym, code, is_target)                                                                      \
  void fname(int* x, int* win, int* ierr)                                                                              \
  {                                                                                                                    \
    WL_REAL(real, wl_f_win_int_t, sym);                                                                                \
    WL_RMA_BEGIN();                                                                                                    \
    MPI_Win w = PMPI_Win_f2c(*win);                                                                                    \
    wl_mv2_pre(code, w, (is_target) ? *x : -1, 0.0);                                                                   \
    real(x, win, ierr);                                                                                                \
    if (*ierr == MPI_SUCCESS)                                                                                          \
      wl_mv2_post(code, w, (is_target) ? *x : -1, MPI_GROUP_NULL, 0.0);                                                \
    if (*ierr == MPI_SUCCESS)                                                                                          \
      wl_rma(code, w, (is_target) ? *x : -1, 0.0, (is_target) ? 0.0 : (double)*x, t0_, ra_);                        \
  }
WL_F_WIN_INT(mpi_win_fence_, "mpi_win_fence_", WL_WIN_FENCE, 0)
WL_F_WIN_INT(mpi_win_lock_all_, "mpi_win_lock_all_", WL_WIN_LOCK_ALL, 0)
WL_F_WIN_INT(mpi_win_unlock_, "mpi_win_unlock_", WL_WIN_UNLOCK, 1)
WL_F_WIN_INT(mpi_win_flush_, "mpi_win_flush_", WL_WIN_FLUSH, 1)
WL_F_WIN_INT(mpi_win_flush_local_, "mpi_win_flush_local_", WL_WIN_FLUSH_LOCAL, 1)

#define WL_F_WIN_GROUP(fname, sym, code)                                                                               \
  void fname(int* group, int assert_, int* win, int* ierr)                                                             \
  {                                                                                                                    \
    WL_REAL(real, wl_f_win_group_t, sym);                                                                              \
    WL_RMA_BEGIN();                                                                                                    \
    real(group, assert_, win, ierr);                                                                                   \
    if (*ierr == MPI_SUCCESS)                                                                                          \
      wl_mv2_post(code, PMPI_Win_f2c(*win), -1, PMPI_Group_f2c(*group), 0.0);                                          \
    if (*ierr == MPI_SUCCESS)                                                                                          \
      wl_rma_group(code, PMPI_Win_f2c(*win), PMPI_Group_f2c(*group), t0_, ra_);                                        \
  }
WL_F_WIN_GROUP(mpi_win_post_, "mpi_win_post_", WL_WIN_POST)
WL_F_WIN_GROUP(mpi_win_start_, "mpi_win_start_", WL_WIN_START)

void mpi_win_lock_(int* lock_type, int* rank, int* assert_, int* win, int* ierr)
{
  WL_REAL(real, wl_f_win_lock_t, "mpi_win_lock_");
  WL_RMA_BEGIN();
  int code = *lock_type == MPI_LOCK_EXCLUSIVE ? WL_WIN_LOCK : WL_WIN_LOCK_SHARED;
  wl_mv2_pre(code, PMPI_Win_f2c(*win), *rank, 0.0);
  real(lock_type, rank, assert_, win, ierr);
  if (*ierr == MPI_SUCCESS)
    wl_mv2_post(code, PMPI_Win_f2c(*win), *rank, MPI_GROUP_NULL, 0.0);
  if (*ierr == MPI_SUCCESS)
    wl_rma(code, PMPI_Win_f2c(*win), *rank, 0.0, 0.0, t0_, ra_);
}

#define WL_F_RMA(fname, sym, code)                                                                                     \
  void fname(int* oaddr, int* ocount, int* otype, int* target, MPI_Aint* tdisp, int* tcount, int* ttype, int* win,    \
             int* ierr)                                                                                                \
  {                                                                                                                    \
    WL_REAL(real, wl_f_rma_t, sym);                                                                                    \
    WL_RMA_BEGIN();                                                                                                    \
    wl_mv2_pre(code, PMPI_Win_f2c(*win), *target, wl_bytes(*ocount, PMPI_Type_f2c(*otype)));                           \
    real(oaddr, ocount, otype, target, tdisp, tcount, ttype, win, ierr);                                               \
    if (*ierr == MPI_SUCCESS)                                                                                          \
      wl_mv2_post(code, PMPI_Win_f2c(*win), *target, MPI_GROUP_NULL, wl_bytes(*ocount, PMPI_Type_f2c(*otype)));         \
    if (*ierr == MPI_SUCCESS && *target != MPI_PROC_NULL)                                                              \
      wl_rma(code, PMPI_Win_f2c(*win), *target, wl_bytes(*ocount, PMPI_Type_f2c(*otype)), 0.0, t0_, ra_);             \
  }
WL_F_RMA(mpi_put_, "mpi_put_", WL_PUT)
WL_F_RMA(mpi_get_, "mpi_get_", WL_GET)

void mpi_accumulate_(int* oaddr, int* ocount, int* otype, int* target, MPI_Aint* tdisp, int* tcount, int* ttype,
                     int* op, int* win, int* ierr)
{
  WL_REAL(real, wl_f_acc_t, "mpi_accumulate_");
  WL_RMA_BEGIN();
  wl_mv2_pre(WL_ACCUMULATE, PMPI_Win_f2c(*win), *target, wl_bytes(*ocount, PMPI_Type_f2c(*otype)));
  real(oaddr, ocount, otype, target, tdisp, tcount, ttype, op, win, ierr);
  if (*ierr == MPI_SUCCESS)
    wl_mv2_post(WL_ACCUMULATE, PMPI_Win_f2c(*win), *target, MPI_GROUP_NULL, wl_bytes(*ocount, PMPI_Type_f2c(*otype)));
  if (*ierr == MPI_SUCCESS && *target != MPI_PROC_NULL)
    wl_rma(WL_ACCUMULATE, PMPI_Win_f2c(*win), *target, wl_bytes(*ocount, PMPI_Type_f2c(*otype)), 0.0, t0_, ra_);
}
