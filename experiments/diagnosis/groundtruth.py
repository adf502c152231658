"""Ground truth of a run: the cause ledger and counterfactual re-simulation (DESIGN.md section 8).

The true cost of a set X of injected causes is the total wait of the scenario
minus the total wait of the same scenario re-simulated with X removed (same
operations, same seeds: :meth:`~waitlab.models.ops.OpTable.without_causes`).
It is computed per region, per ``(rank, region)`` for a list of candidates, per
cause kind (imbalance, noise, overhead, swap, flush, link), for all causes together,
and for any named set (e.g. "balance the regions model A blamed").

Re-runs go through one :class:`concurrent.futures.Executor` seam (local
processes by default; pass any executor, e.g. a Dask ``Client.get_executor()``)
and are cached on disk, keyed by the scenario hash and a digest of the
counterfactual operations, so a repeated diagnosis does not simulate again.

Besides the total wait each re-run records the makespan, the wait per MPI
operation and the sum over collective instances of the largest wait (the
wait H-CWP-DM's "earliest" pairing considers), so every model can be compared
with the truth in its own terms.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from tqdm import tqdm

from waitlab.experiments.leftovers import clean_stale_tmp, temporary_name
from waitlab.experiments.pipeline import link_factors, prepare, without_links
from waitlab.experiments.pipeline import rerun as pipeline_rerun
from waitlab.experiments.scenario import Scenario
from waitlab.models.analysis.metrics import METRICS, ledger_frame, metric_value, wait_metrics
from waitlab.models.ops import CAUSE_KINDS, OpTable
from waitlab.simulator.build import cache_dir
from waitlab.version import code_digest

__all__ = ["METRICS", "CauseSet", "Counterfactuals", "GroundTruth", "cache_use", "ledger_frame", "metric_value",
           "wait_metrics"]


class Bar(tqdm):
    """A tqdm progress bar without tqdm's monitor thread (``TMonitor``, which every bar starts, even a disabled one,
    and which outlives the call): a call of waitlab leaves no thread behind.  Only this class's bars go without it;
    the setting of the caller's own ``tqdm`` bars is left as it is."""

    monitor_interval = 0


def default_cache_dir() -> Path:
    """``counterfactuals/`` in waitlab's one cache (:func:`waitlab.simulator.build.cache_dir`)."""
    return cache_dir() / "counterfactuals"


def cache_use(gt: GroundTruth) -> str:
    """How the counterfactual re-runs were obtained, e.g. ``3 counterfactual runs: 1 simulated, 2 from cache``."""
    runs = "run" if gt.distinct == 1 else "runs"
    return f"{gt.distinct} counterfactual {runs}: {gt.simulated} simulated, {gt.distinct - gt.simulated} from cache"


@dataclass(frozen=True)
class CauseSet:
    """A named set of ledger rows to remove in one counterfactual re-run."""

    label: str
    group: str  # "region", "rank_region", "kind", "all" or a caller's group (e.g. "balance")
    key: Any  # region name, (rank, region), kind, or None
    mask: npt.NDArray[np.bool_] = field(repr=False)

    @property
    def n_causes(self) -> int:
        return int(self.mask.sum())


def standard_sets(ledger: pd.DataFrame, *, candidates: Iterable[tuple[int, str]] = (), regions: bool = True,
                  kinds: bool = True) -> list[CauseSet]:
    """Cause sets per region, per cause kind, all causes, and per candidate ``(rank, region)``.

    Examples
    --------
    >>> import pandas as pd
    >>> led = pd.DataFrame({"rank": [0, 1, 1], "region": ["A", "A", "B"], "step": [0, 0, 0],
    ...                     "seconds": [1.0, 2.0, 0.5], "kind": ["imbalance", "imbalance", "noise"]})
    >>> [s.label for s in standard_sets(led, candidates=[(1, "A")])]
    ['all', 'region:A', 'region:B', 'kind:imbalance', 'kind:noise', 'rank_region:1:A']
    """
    pos = ledger["seconds"].to_numpy(float) > 0
    region = ledger["region"].astype(str).to_numpy()
    kind = ledger["kind"].astype(str).to_numpy()
    rank = ledger["rank"].to_numpy()
    out = [CauseSet("all", "all", None, pos.copy())]
    if regions:
        for r in sorted(set(region[pos].tolist())):
            out.append(CauseSet(f"region:{r}", "region", r, pos & (region == r)))
    if kinds:
        for k in [k for k in CAUSE_KINDS if (pos & (kind == k)).any()]:
            out.append(CauseSet(f"kind:{k}", "kind", k, pos & (kind == k)))
    seen: set[tuple[int, str]] = set()
    for rk, rg in candidates:
        key = (int(rk), str(rg))
        if key in seen:
            continue
        seen.add(key)
        mask = pos & (rank == key[0]) & (region == key[1])
        if mask.any():
            out.append(CauseSet(f"rank_region:{key[0]}:{key[1]}", "rank_region", key, mask))
    return out


def region_set(ledger: pd.DataFrame, regions: Sequence[str], label: str, group: str = "balance") -> CauseSet:
    """All causes of the given regions (on every rank): "balance these regions"."""
    mask = (ledger["seconds"].to_numpy(float) > 0) & ledger["region"].astype(str).isin(list(regions)).to_numpy()
    return CauseSet(label, group, tuple(regions), mask)


def top_candidates(ledger: pd.DataFrame, n: int) -> list[tuple[int, str]]:
    """The ``n`` (rank, region) pairs with the most injected seconds."""
    if not len(ledger) or n <= 0:
        return []
    s = ledger.groupby(["rank", "region"])["seconds"].sum().sort_values(ascending=False, kind="stable")
    return [(int(r), str(g)) for r, g in s.index[:n]]


def ops_digest(ops: OpTable) -> str:
    """SHA-256 of everything in ``ops`` that the replay sees."""
    h = hashlib.sha256()
    h.update(str(ops.n_ranks).encode())
    for c in ops.COLUMNS:
        h.update(c.encode())
        h.update(np.ascontiguousarray(getattr(ops, c)).tobytes())
    h.update("\0".join(ops.names).encode())
    return h.hexdigest()


#: A re-run: ``(scenario, ops, speed_profiles) -> wait_metrics``.
Rerun = Callable[[Scenario, OpTable, Mapping[str, str] | None], dict[str, Any]]


def _main_is_guarded() -> bool:
    """Whether spawned workers can safely re-import ``__main__`` (it is guarded, a module, or interactive)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or path is None or getattr(main, "__spec__", None) is not None:
        return True
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return False
    return "__main__" in text


def default_executor(max_workers: int = 2) -> Executor:
    """Local worker processes (spawned: they never inherit the parent's threads).

    A script without an ``if __name__ == "__main__":`` guard cannot start spawned
    workers; it then gets threads, each driving its own ``smpirun`` process.
    """
    workers = max(1, min(max_workers, os.cpu_count() or 1))
    if not _main_is_guarded():
        return ThreadPoolExecutor(max_workers=workers)
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


@dataclass
class Counterfactuals:
    """Re-simulates a scenario without given cause sets, through an executor, with a disk cache.

    Parameters
    ----------
    scenario : Scenario
    ops : OpTable
        The operations the baseline run replayed (perturbations included).
    executor : Executor, optional
        Where re-runs go; default: :func:`default_executor` (created and shut down per batch).
    cache_dir : Path, optional
        Default :func:`default_cache_dir`; ``None`` with ``use_cache=False`` disables caching.
    speed_profiles : mapping, optional
        SimGrid speed profiles (system noise) of the baseline run.  Noise injected this way
        is in the ledger but in no operation: a set holding all of it re-runs without the
        profiles; a set holding part of it keeps them (that part is not removed, see
        :meth:`partial_noise`).
    rerun : callable, optional
        ``(scenario, ops, speed_profiles) -> metrics`` (tests substitute a cheaper simulator);
        must be picklable for a process executor.
    """

    scenario: Scenario
    ops: OpTable
    executor: Executor | None = None
    cache_dir: Path | None = None
    use_cache: bool = True
    rerun: Rerun = pipeline_rerun
    progress: bool = False
    speed_profiles: Mapping[str, str] | None = None
    simulated: int = 0  # re-runs actually simulated (not served from the cache)
    distinct: int = 0  # distinct re-runs asked for (sets that remove the same causes count once)

    def __post_init__(self) -> None:
        if self.use_cache and self.cache_dir is None:
            self.cache_dir = default_cache_dir()
        attached = np.zeros(len(self.ops.ledger), bool)
        attached[self.ops.cause[self.ops.cause >= 0]] = True
        self._detached_noise = ~attached & (self.ops.ledger.kind == CAUSE_KINDS.index("noise")) \
            & (self.ops.ledger.seconds > 0)
        # degraded links (kind link): node -> its ledger rows; removed only as a whole (the re-run restores the link)
        self._links: dict[int, npt.NDArray[np.bool_]] = {}
        is_link = (self.ops.ledger.kind == CAUSE_KINDS.index("link")) & (self.ops.ledger.seconds > 0)
        if is_link.any() and link_factors(self.scenario):
            node_of_rank = np.asarray(prepare(self.scenario).platform.node_of_rank)
            for node in link_factors(self.scenario):
                rows = is_link & (node_of_rank[self.ops.ledger.rank] == node)
                if rows.any():
                    self._links[node] = rows

    def _restored_links(self, mask: npt.NDArray[np.bool_]) -> tuple[int, ...]:
        """Nodes whose degraded link ``mask`` removes (all of its ledger rows)."""
        return tuple(n for n, rows in self._links.items() if mask[rows].all())

    def partial_link(self, mask: npt.NDArray[np.bool_]) -> bool:
        """Whether ``mask`` holds some, but not all, of a degraded link's rows (the link then stays in the re-run)."""
        return any(bool(mask[rows].any()) and not bool(mask[rows].all()) for rows in self._links.values())

    def _profiles_for(self, mask: npt.NDArray[np.bool_]) -> Mapping[str, str] | None:
        if not self.speed_profiles:
            return None
        if self._detached_noise.any() and mask[self._detached_noise].all():
            return None
        return self.speed_profiles

    def partial_noise(self, mask: npt.NDArray[np.bool_]) -> bool:
        """Whether ``mask`` holds some, but not all, of the profile noise (which then stays in the re-run)."""
        sel = mask[self._detached_noise]
        return bool(self.speed_profiles) and bool(sel.any()) and not bool(sel.all())

    def _path(self, digest: str) -> Path | None:
        if not self.use_cache or self.cache_dir is None:
            return None
        # keyed by waitlab's code too: metrics an older waitlab computed (other wait-state rules) are not reused
        return Path(self.cache_dir) / f"{self.scenario.hash()}-{digest[:32]}-{code_digest()}.json"

    def run(self, sets: Sequence[CauseSet]) -> dict[str, dict[str, Any]]:
        """Metrics of the scenario re-run without each set (label -> metrics)."""
        jobs: dict[str, tuple[OpTable, Mapping[str, str] | None, tuple[int, ...]]] = {}
        label_digest: dict[str, str] = {}
        for cs in sets:
            cf = self.ops.without_causes(cs.mask)
            prof = self._profiles_for(cs.mask)
            links = self._restored_links(cs.mask)
            d = hashlib.sha256((ops_digest(cf) + json.dumps(prof, sort_keys=True)
                                + (f"links:{list(links)}" if links else "")).encode()).hexdigest()
            label_digest[cs.label] = d
            jobs.setdefault(d, (cf, prof, links))
        self.distinct += len(jobs)
        results: dict[str, dict[str, Any]] = {}
        todo: dict[str, tuple[OpTable, Mapping[str, str] | None, tuple[int, ...]]] = {}
        for d, job in jobs.items():
            path = self._path(d)
            if path is not None and path.exists():
                try:
                    results[d] = json.loads(path.read_text())["metrics"]
                    continue
                except (OSError, ValueError, KeyError, TypeError, RecursionError):  # a damaged entry: simulated again
                    pass
            todo[d] = job
        if todo:
            results.update(self._simulate(todo))
        return {label: results[d] for label, d in label_digest.items()}

    def _simulate(self, todo: Mapping[str, tuple[OpTable, Mapping[str, str] | None, tuple[int, ...]]]
                  ) -> dict[str, dict[str, Any]]:
        own = self.executor is None
        ex = default_executor() if own else self.executor
        assert ex is not None
        out: dict[str, dict[str, Any]] = {}
        try:
            futures: dict[Future[dict[str, Any]], str] = {
                ex.submit(self.rerun, without_links(self.scenario, links) if links else self.scenario, cf, prof): d
                for d, (cf, prof, links) in todo.items()}
            for fut in Bar(as_completed(futures), total=len(futures), desc="counterfactual re-runs",
                            unit="run", disable=not self.progress, file=sys.stderr):
                d = futures[fut]
                out[d] = fut.result()
                self.simulated += 1
                path = self._path(d)
                if path is not None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    if self.simulated == 1:  # cache entries a killed process was writing
                        clean_stale_tmp(path.parent)
                    tmp = path.with_name(temporary_name(path.stem))
                    try:
                        tmp.write_text(json.dumps({"scenario_hash": self.scenario.hash(), "ops_digest": d,
                                                   "metrics": out[d]}, sort_keys=True) + "\n")
                        os.replace(tmp, path)
                    except BaseException:  # a full disk, an interruption: no half entry stays
                        tmp.unlink(missing_ok=True)
                        raise
        finally:
            if own:
                ex.shutdown(wait=True, cancel_futures=True)
        return out


@dataclass(frozen=True)
class GroundTruth:
    """Counterfactual costs of the injected causes.

    Attributes
    ----------
    baseline : dict
        :func:`wait_metrics` of the run itself.
    ledger : DataFrame
        The cause ledger (``rank, region, step, seconds, kind``).
    sets : tuple of CauseSet
    reruns : dict
        Label -> :func:`wait_metrics` of the re-run without that set.
    simulated : int
        Re-runs that were simulated (the rest came from the cache).
    distinct : int
        Distinct re-runs (sets that remove the same causes are run once).
    """

    baseline: dict[str, Any]
    ledger: pd.DataFrame
    sets: tuple[CauseSet, ...]
    reruns: dict[str, dict[str, Any]]
    simulated: int = 0
    distinct: int = 0
    partial_noise: tuple[str, ...] = ()  # labels whose profile noise or degraded link could not be removed

    def cost_of(self, label: str, metric: str = "total_wait") -> float:
        """True cost of one set: baseline metric minus the re-run's (see :func:`metric_value`)."""
        return metric_value(self.baseline, metric) - metric_value(self.reruns[label], metric)

    def cost(self, group: str, metric: str = "total_wait") -> pd.Series:
        """True cost per key of a group (``region``, ``rank_region``, ``kind``), largest first."""
        sel = [s for s in self.sets if s.group == group]
        if group == "rank_region":
            idx: pd.Index = pd.MultiIndex.from_tuples([s.key for s in sel], names=["rank", "region"]) if sel \
                else pd.MultiIndex.from_arrays([[], []], names=["rank", "region"])
        else:
            idx = pd.Index([s.key for s in sel], name=group)
        s = pd.Series([self.cost_of(x.label, metric) for x in sel], index=idx, dtype=float)
        return s.sort_values(ascending=False, kind="stable")

    @property
    def all_causes(self) -> float:
        """True cost of every injected cause together (total wait)."""
        return self.cost_of("all") if "all" in self.reruns else float("nan")

    def injected(self, group: str) -> pd.Series:
        """Injected seconds per key of a group (from the ledger)."""
        led = self.ledger[self.ledger["seconds"] > 0]
        if group == "region":
            return led.groupby("region")["seconds"].sum().sort_values(ascending=False)
        if group == "kind":
            return led.groupby("kind")["seconds"].sum().sort_values(ascending=False)
        return led.groupby(["rank", "region"])["seconds"].sum().sort_values(ascending=False)

    def to_dict(self, measures: Iterable[str] = ()) -> dict[str, Any]:
        """Plain data for the JSON report.

        ``by_region`` is the true cost per region in total wait; ``by_region_by_measure`` and
        ``all_causes_by_measure`` give it in each of ``measures`` (the measures the models are scored against,
        e.g. ``considered_wait:allreduce`` for H-CWP-DM "earliest"; see :func:`metric_value`), keyed by measure.
        """
        def series(s: pd.Series) -> dict[str, float]:
            return {(":".join(str(x) for x in k) if isinstance(k, tuple) else str(k)): float(v) for k, v in s.items()}

        return {
            "baseline": self.baseline,
            "all_causes": self.all_causes,
            "by_region": series(self.cost("region")),
            "by_kind": series(self.cost("kind")),
            "by_rank_region": series(self.cost("rank_region")),
            "by_region_by_measure": {m: series(self.cost("region", m)) for m in dict.fromkeys(measures)},
            "all_causes_by_measure": {m: self.cost_of("all", m) if "all" in self.reruns else float("nan")
                                      for m in dict.fromkeys(measures)},
            "injected_by_region": series(self.injected("region")),
            "injected_by_kind": series(self.injected("kind")),
            "sets": {s.label: {"group": s.group, "causes": s.n_causes, "rerun": self.reruns.get(s.label),
                               "noise_kept": s.label in self.partial_noise} for s in self.sets},
            "simulated_reruns": self.simulated,
        }


def ground_truth(scenario: Scenario, ops: OpTable, baseline: dict[str, Any], *,
                 candidates: Iterable[tuple[int, str]] = (), n_candidates: int = 8,
                 extra_sets: Sequence[CauseSet] = (), executor: Executor | None = None,
                 cache_dir: Path | None = None, use_cache: bool = True, progress: bool = False,
                 speed_profiles: Mapping[str, str] | None = None, rerun: Rerun | None = None) -> GroundTruth:
    """Counterfactual costs per region, per cause kind, of all causes, and per candidate (rank, region).

    Parameters
    ----------
    scenario, ops : the baseline run's scenario and the operations it replayed.
    baseline : dict
        :func:`wait_metrics` of the baseline run.
    candidates : iterable of (rank, region)
        Pairs to cost individually (e.g. the models' most blamed), in addition to the
        ``n_candidates`` pairs with the most injected seconds.
    extra_sets : sequence of CauseSet
        More sets, e.g. :func:`region_set` of each model's culprits.
    executor, cache_dir, use_cache, progress, speed_profiles, rerun : see :class:`Counterfactuals`.
    """
    ledger = ledger_frame(ops)
    cands = [*top_candidates(ledger, n_candidates), *candidates]
    sets = [*standard_sets(ledger, candidates=cands), *extra_sets]
    cf = Counterfactuals(scenario, ops, executor=executor, cache_dir=cache_dir, use_cache=use_cache,
                         rerun=rerun if rerun is not None else pipeline_rerun, progress=progress,
                         speed_profiles=speed_profiles)
    reruns = cf.run(sets)
    partial = tuple(s.label for s in sets if cf.partial_noise(s.mask) or cf.partial_link(s.mask))
    return GroundTruth(baseline=baseline, ledger=ledger, sets=tuple(sets), reruns=reruns, simulated=cf.simulated,
                       distinct=cf.distinct, partial_noise=partial)
