"""A measured trace read as it was recorded: the source of kind ``recorded``, whose stage is not SMPI.

``[application] kind = "recorded"`` names an OTF2 archive (e.g. Score-P's ``traces.otf2``).  Its operations are those
of ``kind = "otf2"`` (:func:`waitlab.models.otf2_ops.records_to_timed_ops`, the same conversion, except that its
v-collectives keep each rank's own recorded bytes where a replay needs equal counts), and instead of
being replayed on a modeled platform each keeps the times the trace recorded: the pipeline builds the event table,
wait states, summary and results folder from them (:func:`waitlab.experiments.pipeline.finish`), as it does from a
real program's measured times.  Nothing is simulated, so nothing can be changed: a recorded run has no platform
model, no perturbation and no counterfactual ground truth (its cause ledger is empty).  The what-if replay of the
same trace is ``kind = "otf2"`` (or ``waitlab import-otf2``).

Its "platform" (:func:`recorded_platform`) describes where the ranks ran, as the archive says (the system tree's
node of each process: Score-P's host names); it renders no SimGrid platform.

Late Receiver: whether a send waited for its receive is read from the timestamps (it left after the receive was
entered), as Scalasca does (``PatternMPI_LateReceiver``): the real MPI's eager threshold is not in the trace, so the
wait states use ``eager_threshold = 0`` (:data:`RECORDED_EAGER_THRESHOLD`), where a simulated run uses SMPI's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from waitlab.errors import InputError
from waitlab.experiments.real_params import RECORDED, RecordedParams, archive_files
from waitlab.experiments.run_folder import file_digest
from waitlab.experiments.scenario import Scenario, from_mapping
from waitlab.experiments.sources import Execution
from waitlab.models.analysis.trace_check import first_mismatch
from waitlab.models.ops import OpTable
from waitlab.models.otf2_ops import Otf2Unreplayable, records_to_timed_ops
from waitlab.platforms import RenderedPlatform
from waitlab.simulator.otf2_import import otf2_version, read_otf2

#: Messages of fewer bytes never wait for their receive; 0: a recorded trace's timestamps decide at any size.
RECORDED_EAGER_THRESHOLD = 0


@dataclass(frozen=True)
class Recording:
    """An archive read once: its operations with their recorded times, and where each rank ran."""

    ops: OpTable
    t_enter: np.ndarray
    t_exit: np.ndarray
    host_of_rank: tuple[str, ...]
    resolution: float
    seconds: float
    note: str = ""


@lru_cache(maxsize=4)
def _read(path: str, digest: str) -> Recording:
    t = time.perf_counter()
    rec = read_otf2(path, threads=True)
    try:
        ops, t_enter, t_exit = records_to_timed_ops(rec)
    except Otf2Unreplayable as exc:
        raise InputError(path, exc.where, exc.what, exc.fix) from None
    problem = first_mismatch(ops)
    if problem is not None:
        raise InputError(path, f"({problem[0]})", problem[1], "the archive is inconsistent (truncated, or a "
                         "communicator or message is missing): record the run again")
    hosts = rec.host_of_rank or tuple(f"rank-{r}" for r in range(rec.n_ranks))
    left = [f"{n} {what}" for n, what in ((rec.worker_threads, "worker threads' locations"),
                                          (rec.thread_records, "OpenMP/thread records"),
                                          (rec.accelerator_streams, "GPU/accelerator-stream locations")) if n]
    notes = [f"{' and '.join(left)} were not analyzed: waitlab analyzes MPI waits (each rank's MPI calls, on its "
             "master thread)"] if left else []
    silent = np.flatnonzero(np.bincount(rec.rank, minlength=rec.n_ranks) == 0).tolist()
    if silent:  # a rank's event file with no event: usually a trace lost (a rank killed before it flushed)
        who = f"rank {silent[0]}" if len(silent) == 1 else f"ranks {', '.join(map(str, silent))}"
        notes.append(f"{who} recorded no events (its trace was probably lost): its whole time counts as idle")
    note = "; ".join(notes)
    return Recording(ops, t_enter, t_exit, hosts, rec.resolution, time.perf_counter() - t, note)


def recording(path: str | Path) -> Recording:
    """The archive whose anchor file is ``path``, read (cached by its files' sizes and times).

    Raises :class:`InputError` (one line naming the archive) as ``waitlab import-otf2`` does: a missing or unreadable
    archive, records that cannot be read into operations (one-sided MPI, I/O; a hybrid trace's worker
    threads and OpenMP records are left out, said in :attr:`Recording.note`), an inconsistent archive.
    """
    anchor = Path(path)
    if not anchor.is_file():  # read_otf2's own error, before the digest looks for the archive's files
        read_otf2(anchor)
    return _read(str(anchor), "|".join(f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}"
                                       for p in archive_files(anchor)))


def recorded_platform(rec: Recording) -> RenderedPlatform:
    """Where the ranks ran, as the archive says: one node per host name (no SimGrid platform is rendered)."""
    hosts = tuple(dict.fromkeys(rec.host_of_rank))
    node = tuple(hosts.index(h) for h in rec.host_of_rank)
    per_node = np.bincount(np.asarray(node, np.int64), minlength=len(hosts)) if node else np.zeros(1, np.int64)
    return RenderedPlatform(name=RECORDED, xml="", hostfile="\n".join(rec.host_of_rank), core_speed=float("nan"),
                            n_nodes=len(hosts), ranks_per_node=int(per_node.max()), host_of_rank=rec.host_of_rank,
                            node_of_rank=node, hosts=hosts, split_cores=False)


def recorded_scenario(archive: str | Path, name: str | None = None) -> Scenario:
    """The scenario of ``archive`` read as recorded (``kind = "recorded"``), named after its folder by default.

    Raises :class:`InputError` for a bad archive (:func:`recording`).
    """
    anchor = Path(archive)
    rec = recording(anchor)
    stem = name or f"{anchor.resolve().parent.name or 'otf2'}-recorded"
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in stem)
    return from_mapping({"scenario": {"name": stem, "ranks": rec.ops.n_ranks},
                         "application": {"kind": RECORDED, "trace": str(anchor.resolve())}}, "(command line)")


def archive_record(anchor: Path, rec: Recording) -> dict[str, Any]:
    """What ``run.json`` says about the archive: its files' SHA-256, timer and where the ranks ran."""
    files = archive_files(anchor)
    return {"anchor": str(anchor), "sha256": {str(p.relative_to(anchor.parent)): file_digest(p) for p in files},
            "timer_resolution": rec.resolution, "hosts": list(dict.fromkeys(rec.host_of_rank))}


@dataclass(frozen=True)
class RecordedSource:
    """An OTF2 trace of a real run read as recorded: its stage reads the archive, not SMPI."""

    scenario: Scenario
    kind: str = RECORDED

    def recording(self) -> Recording:
        p: RecordedParams = self.scenario.application
        rec = recording(p.trace)
        if rec.ops.n_ranks != self.scenario.ranks:
            raise InputError(p.trace, "(locations)", f"holds {rec.ops.n_ranks} MPI ranks but the scenario has "
                             f"ranks = {self.scenario.ranks}", f"set [scenario] ranks = {rec.ops.n_ranks}")
        return rec

    def operations(self, platform: RenderedPlatform, settings: Mapping[str, str], work: Path) -> OpTable:
        return self.recording().ops

    def execute(self, ops: OpTable | None, platform: RenderedPlatform, settings: Mapping[str, str], work: Path,
                flags: Sequence[str], on_start: Callable[[], object] | None = None) -> Execution:
        """The recorded operations and times (``ops`` other than those: refused, nothing can be re-run; no SMPI stage,
        so ``on_start`` is not called)."""
        rec = self.recording()
        if ops is not None and ops is not rec.ops:
            raise InputError(self.scenario.source, "application.kind", "a recorded run cannot be re-run with other "
                             "operations (a counterfactual needs a simulation)", 'replay the trace with kind = "otf2" '
                             "(waitlab import-otf2 ARCHIVE -o DIR prints such a scenario)")
        anchor = Path(self.scenario.application.trace)
        meta = {"trace": str(anchor), "archive": archive_record(anchor, rec), "otf2_version": otf2_version(),
                "simulated": False, "simgrid_version": None, "smpi_config": {}, "contention": None,
                "eager_threshold": RECORDED_EAGER_THRESHOLD, "seed": None}
        if rec.note:
            meta["note"] = rec.note
        return Execution(rec.ops, None, "", {}, {"import": rec.seconds}, meta, times=(rec.t_enter, rec.t_exit),
                         eager_threshold=RECORDED_EAGER_THRESHOLD)
