/* waitlab measurement layer: the less common one-sided operations (get-accumulate, fetch-and-op,
 * compare-and-swap, request-based Rput/Rget/Raccumulate/Rget_accumulate).
 *
 * #included by waitlab_pmpi_rma.c (one translation unit; its helpers WL_RMA_BEGIN, wl_rma).  Recorded as in
 * that file's header; SMPI's own semantics in every protocol (waitlab_pmpi_rma_mv2.c adds nothing here). */

int MPI_Get_accumulate(const void* oaddr, int ocount, MPI_Datatype otype, void* raddr, int rcount,
                       MPI_Datatype rtype, int target, MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Op op,
                       MPI_Win win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Get_accumulate(oaddr, ocount, otype, raddr, rcount, rtype, target, tdisp, tcount, ttype, op, win);
  if (rc == MPI_SUCCESS && target != MPI_PROC_NULL)
    wl_rma(WL_GET_ACCUMULATE, win, target, wl_bytes(ocount, otype), wl_bytes(rcount, rtype), t0_, ra_);
  return rc;
}

int MPI_Fetch_and_op(const void* oaddr, void* raddr, MPI_Datatype dt, int target, MPI_Aint tdisp, MPI_Op op,
                     MPI_Win win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Fetch_and_op(oaddr, raddr, dt, target, tdisp, op, win);
  if (rc == MPI_SUCCESS && target != MPI_PROC_NULL)
    wl_rma(WL_GET_ACCUMULATE, win, target, wl_bytes(1, dt), wl_bytes(1, dt), t0_, ra_);
  return rc;
}

int MPI_Compare_and_swap(const void* oaddr, void* caddr, void* raddr, MPI_Datatype dt, int target, MPI_Aint tdisp,
                         MPI_Win win)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Compare_and_swap(oaddr, caddr, raddr, dt, target, tdisp, win);
  if (rc == MPI_SUCCESS && target != MPI_PROC_NULL)
    wl_rma(WL_GET_ACCUMULATE, win, target, wl_bytes(1, dt), wl_bytes(1, dt), t0_, ra_);
  return rc;
}

int MPI_Rput(const void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount,
             MPI_Datatype ttype, MPI_Win win, MPI_Request* req)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Rput(oaddr, ocount, otype, target, tdisp, tcount, ttype, win, req);
  if (rc == MPI_SUCCESS && target != MPI_PROC_NULL)
    wl_rma(WL_RPUT, win, target, wl_bytes(ocount, otype), 0.0, t0_, ra_);
  return rc;
}

int MPI_Rget(void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount, MPI_Datatype ttype,
             MPI_Win win, MPI_Request* req)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Rget(oaddr, ocount, otype, target, tdisp, tcount, ttype, win, req);
  if (rc == MPI_SUCCESS && target != MPI_PROC_NULL)
    wl_rma(WL_RGET, win, target, wl_bytes(ocount, otype), 0.0, t0_, ra_);
  return rc;
}

int MPI_Raccumulate(const void* oaddr, int ocount, MPI_Datatype otype, int target, MPI_Aint tdisp, int tcount,
                    MPI_Datatype ttype, MPI_Op op, MPI_Win win, MPI_Request* req)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Raccumulate(oaddr, ocount, otype, target, tdisp, tcount, ttype, op, win, req);
  if (rc == MPI_SUCCESS && target != MPI_PROC_NULL)
    wl_rma(WL_ACCUMULATE, win, target, wl_bytes(ocount, otype), 0.0, t0_, ra_);
  return rc;
}

int MPI_Rget_accumulate(const void* oaddr, int ocount, MPI_Datatype otype, void* raddr, int rcount,
                        MPI_Datatype rtype, int target, MPI_Aint tdisp, int tcount, MPI_Datatype ttype, MPI_Op op,
                        MPI_Win win, MPI_Request* req)
{
  WL_RMA_BEGIN();
  int rc = PMPI_Rget_accumulate(oaddr, ocount, otype, raddr, rcount, rtype, target, tdisp, tcount, ttype, op, win,
                                req);
  if (rc == MPI_SUCCESS && target != MPI_PROC_NULL)
    wl_rma(WL_GET_ACCUMULATE, win, target, wl_bytes(ocount, otype), wl_bytes(rcount, rtype), t0_, ra_);
  return rc;
}
