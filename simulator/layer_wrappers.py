"""The measurement layer's table of MPI wrappers, C and Fortran from one declaration.

:data:`WRAPPERS` lists the MPI calls whose wrapper is a plain "call, then record one action": blocking and
nonblocking sends, and the collectives with scalar counts, blocking and nonblocking.  Each row names the action
of :mod:`waitlab.models.vocabulary` it records (its code is the vocabulary's ``WL_<NAME>``; whether it has a root,
and what its ``value``/``value2`` hold, follow the vocabulary), and :func:`wrappers_source` writes, for every row,
the C wrapper (``MPI_X`` calling ``PMPI_X``) and the Fortran one (``mpi_x_``, calling SMPI's own Fortran binding
found with ``dlsym(RTLD_NEXT)``, then recording through the same statement as C).  The output is checked in as
``simulator/native/waitlab_wrappers.inc`` (included at the end of ``waitlab_pmpi.c``);
``tests/test_programs_mpi.py`` checks that it is fresh.  Regenerate it with::

    python -m waitlab.simulator.layer_wrappers > simulator/native/waitlab_wrappers.inc

Calls with their own logic (init/finalize, receives, sendrecv, completions, persistent requests, v-collectives,
communicator set-up) stay hand-written in ``waitlab_pmpi.c`` and its ``waitlab_pmpi_*.c`` parts.
"""

from __future__ import annotations

from dataclasses import dataclass

from waitlab.models.vocabulary import ACTION

#: Parameter kinds: C type and Fortran type (Fortran passes everything by reference; handles are integers).
_C_TYPE = {"buf": "void*", "cbuf": "const void*", "int": "int", "dt": "MPI_Datatype", "op": "MPI_Op",
           "comm": "MPI_Comm", "req": "MPI_Request*"}
_F_TYPE = {"buf": "void*", "cbuf": "void*", "int": "int*", "dt": "int*", "op": "int*", "comm": "int*", "req": "int*"}
#: How a Fortran argument becomes the C value the recording statement uses.
_F_CONVERT = {"int": "*{n}_f", "dt": "PMPI_Type_f2c(*{n}_f)", "op": "PMPI_Op_f2c(*{n}_f)",
              "comm": "PMPI_Comm_f2c(*{n}_f)"}

#: Argument lists by shape.
SHAPES: dict[str, tuple[tuple[str, str], ...]] = {
    "send": (("buf", "cbuf"), ("count", "int"), ("dt", "dt"), ("dst", "int"), ("tag", "int"), ("comm", "comm")),
    "barrier": (("comm", "comm"),),
    "bcast": (("buf", "buf"), ("count", "int"), ("dt", "dt"), ("root", "int"), ("comm", "comm")),
    "reduce": (("sbuf", "cbuf"), ("rbuf", "buf"), ("count", "int"), ("dt", "dt"), ("op", "op"), ("root", "int"),
               ("comm", "comm")),
    "allreduce": (("sbuf", "cbuf"), ("rbuf", "buf"), ("count", "int"), ("dt", "dt"), ("op", "op"), ("comm", "comm")),
    "exchange": (("sbuf", "cbuf"), ("scount", "int"), ("stype", "dt"), ("rbuf", "buf"), ("rcount", "int"),
                 ("rtype", "dt"), ("comm", "comm")),
    "rooted": (("sbuf", "cbuf"), ("scount", "int"), ("stype", "dt"), ("rbuf", "buf"), ("rcount", "int"),
               ("rtype", "dt"), ("root", "int"), ("comm", "comm")),
}  # fmt: skip


@dataclass(frozen=True)
class Wrapper:
    """One wrapped MPI call: ``MPI_<name>`` records action ``action`` (nonblocking: when it completes)."""

    name: str
    action: str
    shape: str
    nonblocking: bool = False

    @property
    def params(self) -> tuple[tuple[str, str], ...]:
        return SHAPES[self.shape] + ((("req", "req"),) if self.nonblocking else ())


def _row(names: str, action: str, shape: str, nonblocking: bool = False) -> tuple[Wrapper, ...]:
    return tuple(Wrapper(n, action, shape, nonblocking) for n in names.split())


#: Every generated wrapper.  Rsend/Bsend complete like a standard send (recorded as ``send``); Ssend/Issend are the
#: vocabulary's synchronous sends (late-receiver candidates at any size).
WRAPPERS: tuple[Wrapper, ...] = (
    *_row("Send Rsend Bsend", "send", "send"), *_row("Ssend", "ssend", "send"),
    *_row("Isend Irsend Ibsend", "isend", "send", True), *_row("Issend", "issend", "send", True),
    *_row("Barrier", "barrier", "barrier"), *_row("Bcast", "bcast", "bcast"), *_row("Reduce", "reduce", "reduce"),
    *_row("Allreduce", "allreduce", "allreduce"), *_row("Scan", "scan", "allreduce"),
    *_row("Exscan", "exscan", "allreduce"), *_row("Alltoall", "alltoall", "exchange"),
    *_row("Allgather", "allgather", "exchange"), *_row("Gather", "gather", "rooted"),
    *_row("Scatter", "scatter", "rooted"),
    *_row("Ibarrier", "barrier", "barrier", True), *_row("Ibcast", "bcast", "bcast", True),
    *_row("Ireduce", "reduce", "reduce", True), *_row("Iallreduce", "allreduce", "allreduce", True),
    *_row("Iscan", "scan", "allreduce", True), *_row("Iexscan", "exscan", "allreduce", True),
    *_row("Ialltoall", "alltoall", "exchange", True), *_row("Iallgather", "allgather", "exchange", True),
    *_row("Igather", "gather", "rooted", True), *_row("Iscatter", "scatter", "rooted", True),
)  # fmt: skip


#: Fortran wrappers that call a function of the layer instead of SMPI's own Fortran binding (which calls SMPI's C
#: function inside libsimgrid, out of the layer's reach): Ibarrier with barrier semantics (waitlab_pmpi_coll.c).
FORTRAN_VIA: dict[str, str] = {"Ibarrier": "wl_f_ibarrier"}


def _values(w: Wrapper) -> tuple[str, str]:
    """``value`` and ``value2`` of the recorded action (the vocabulary's meaning of its columns)."""
    names = {n for n, _ in w.params}
    if "scount" in names:  # send bytes (per rank), receive bytes (per rank)
        return "wl_bytes(scount, stype)", "wl_bytes(rcount, rtype)"
    if "count" in names:  # bytes of the buffer (reductions: flops are not measured)
        return "wl_bytes(count, dt)", "0.0"
    return "0.0", "0.0"


def _record(w: Wrapper, key: str) -> str:
    """The recording statement, shared by the C and the Fortran wrapper (C names and types in scope)."""
    a = ACTION[w.action]
    code = f"WL_{a.name.upper()}"
    if a.kind == "send":
        if w.nonblocking:
            return (f"if (dst != MPI_PROC_NULL) {{\n      int64_t op = wl_p2p_send({code}, ra_, t0_, count, dt, dst, "
                    f"tag, comm);\n      wl_req_add({key}, op, wl_args[op].peer, tag, 0, 0, comm);\n    }}")
        return f"if (dst != MPI_PROC_NULL)\n      wl_p2p_send({code}, ra_, t0_, count, dt, dst, tag, comm);"
    assert a.is_collective, w
    root = "wl_root(comm, root)" if a.is_rooted else "-1"
    v, v2 = _values(w)
    if w.nonblocking:
        return f"WL_COLL_ADD({key}, {code}, {root}, comm, {v}, {v2});"
    return f"WL_COLL({code}, {root}, comm, {v}, {v2});"


def _begin(w: Wrapper) -> str:
    """Entry of a wrapper: WL_BEGIN (clock, pending injections) for a recorded call; a nonblocking collective is
    recorded by the call that completes it, so its start is no anchor and runs nothing (its clock is kept for the
    capture's post line)."""
    if w.nonblocking and ACTION[w.action].is_collective:
        return "  double tp_ = wl_post_clock();\n"
    return "  WL_BEGIN();\n"


def _inside(w: Wrapper) -> str:
    """What a blocking send or rooted collective tells of itself on entry (``WL_IN``: the peer or root a rank killed
    inside it reports, issue 22); nothing for the other calls."""
    if w.nonblocking:
        return ""
    a = ACTION[w.action]
    if a.kind == "send":
        return "  WL_IN(WL_IN_TO, dst, 0, tag, comm);\n"
    return "  WL_IN(WL_IN_ROOT, root, 0, 0, comm);\n" if a.is_rooted else ""


def _c_wrapper(w: Wrapper) -> str:
    params = ", ".join(f"{_C_TYPE[k]} {n}" for n, k in w.params)
    args = ", ".join(n for n, _ in w.params)
    return (f"int MPI_{w.name}({params})\n{{\n{_begin(w)}{_inside(w)}  int rc = PMPI_{w.name}({args});\n"
            f"  if (wl_on && rc == MPI_SUCCESS) {{\n    {_record(w, '(uintptr_t)*req')}\n  }}\n  return rc;\n}}\n")


def _f_wrapper(w: Wrapper) -> str:
    f = f"mpi_{w.name.lower()}_"
    types = ", ".join([*(_F_TYPE[k] for _, k in w.params), "int*"])
    params = ", ".join([*(f"{_F_TYPE[k]} {n}{'' if k in ('buf', 'cbuf') else '_f'}" for n, k in w.params),
                        "int* ierr"])
    args = ", ".join([*(n if k in ("buf", "cbuf") else f"{n}_f" for n, k in w.params), "ierr"])
    conv = "".join(f"    WL_UNUSED {_C_TYPE[k]} {n} = {_F_CONVERT[k].format(n=n)};\n" for n, k in w.params
                   if k in _F_CONVERT)
    via = FORTRAN_VIA.get(w.name)
    real = (f"  WL_REAL(real, wl_f_{w.name.lower()}_t, \"{f}\");\n" if via is None else "")
    return (f"typedef void (*wl_f_{w.name.lower()}_t)({types});\n\nvoid {f}({params})\n{{\n"
            f"{real}{_begin(w)}  {via or 'real'}({args});\n"
            f"  if (wl_on && *ierr == MPI_SUCCESS) {{\n{conv}    {_record(w, 'wl_fkey(*req_f)')}\n  }}\n}}\n")


def wrappers_source() -> str:
    """The C source of ``simulator/native/waitlab_wrappers.inc``."""
    head = [
        "/* waitlab_wrappers.inc: GENERATED from waitlab.simulator.layer_wrappers (WRAPPERS) and the action",
        " * vocabulary by wrappers_source(); do not edit.  Regenerate:",
        " *   python -m waitlab.simulator.layer_wrappers > simulator/native/waitlab_wrappers.inc",
        " * Included at the end of waitlab_pmpi.c (its helpers: WL_BEGIN, WL_COLL, WL_COLL_ADD, WL_REAL, wl_p2p_send,",
        " * wl_req_add, wl_fkey, wl_root, wl_bytes). */",
        "",
        "#define WL_UNUSED __attribute__((unused))",
        "",
        "/* ---- C ---- */",
        "",
    ]
    body = [_c_wrapper(w) for w in WRAPPERS]
    fortran = ["/* ---- Fortran (mpif.h / use mpi): SMPI's own binding, then the same record as C ---- */", ""]
    fortran += [_f_wrapper(w) for w in WRAPPERS]
    return "\n".join(head) + "\n".join(body) + "\n" + "\n".join(fortran)


def _check() -> None:
    for w in WRAPPERS:
        assert w.action in ACTION and w.shape in SHAPES, w
        assert ACTION[w.action].is_rooted == any(n == "root" for n, _ in w.params), w


_check()

if __name__ == "__main__":
    print(wrappers_source(), end="")
