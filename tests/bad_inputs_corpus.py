"""The bad-input corpus: malformed inputs of every file kind waitlab reads, one builder each.

A builder gets an empty folder ``d`` and returns ``(argv, file, field)``: the command line that reads the bad
input, and two words the one-line error must contain (the file's name, the field or line).  Every output goes
to ``d / "out"``, which must not exist afterwards.  Used by ``tests/test_bad_inputs.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scenario_files import TINY

Built = tuple[list[str], str, str]


@dataclass(frozen=True)
class Case:
    """One malformed input: its file kind, an id, and how to build it."""

    kind: str
    id: str
    build: Callable[[Path], Built]
    needs_nonroot: bool = False


GOOD = TINY

CASES: list[Case] = []


def case(kind: str, id: str, *, nonroot: bool = False) -> Callable[[Callable[[Path], Built]], Callable[[Path], Built]]:
    def add(fn: Callable[[Path], Built]) -> Callable[[Path], Built]:
        CASES.append(Case(kind, id, fn, nonroot))
        return fn
    return add


def run_argv(d: Path, scen: Path) -> list[str]:
    return ["run", str(scen), "-o", str(d / "out"), "--no-png"]


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def unreadable(path: Path) -> Path:
    os.chmod(path, 0)
    return path


# ----------------------------------------------------------------------------------------------------------------
# Every way a whole file can be bad, for each TOML kind (scenario, sweep, platform)
# ----------------------------------------------------------------------------------------------------------------

HUGE = 17 << 20  # above the 16 MiB cap of TOML inputs


def _file_level(kind: str, make: Callable[[Path, str | bytes | None], Built], good: str) -> None:
    cut = good[: len(good) // 2].rsplit("=", 1)[0] + '= "unterminated'
    variants: dict[str, Callable[[Path], Built]] = {
        "missing": lambda d: make(d, None),
        "folder": lambda d: make(d, b"\0folder"),
        "not-utf8": lambda d: make(d, good.encode() + b"\n# \xff\xfe latin \xe9\n"),
        "binary": lambda d: make(d, bytes(range(256)) * 4),
        "utf16": lambda d: make(d, good.encode("utf-16")),
        "json": lambda d: make(d, '{"scenario": {"name": "x"}}'),
        "truncated": lambda d: make(d, cut),
        "csv-like": lambda d: make(d, "a,b,c\n1,2,3\n"),
        "duplicate-key": lambda d: make(d, good + "\n[scenario]\nname = \"again\"\n"),
        "deep-array": lambda d: make(d, "x = " + "[" * 20000 + "]" * 20000 + "\n"),
        "absurdly-large": lambda d: make(d, b"# " + b"a" * HUGE + b"\n"),
        "nul-bytes": lambda d: make(d, good.replace("\n", "\0\n", 1)),
    }
    for name, fn in variants.items():
        CASES.append(Case(kind, f"{kind}-{name}", fn))
    CASES.append(Case(kind, f"{kind}-unreadable", lambda d: make(d, b"\0unreadable"), needs_nonroot=True))


def _scenario_file(d: Path, content: str | bytes | None) -> Built:
    p = d / "s.toml"
    if content == b"\0folder":
        p.mkdir()
    elif content == b"\0unreadable":
        unreadable(write(p, GOOD))
    elif content is not None:
        write(p, content)
    return run_argv(d, p), "s.toml", "("


def _sweep_file(d: Path, content: str | bytes | None) -> Built:
    write(d / "base.toml", GOOD)
    p = d / "sw.toml"
    if content == b"\0folder":
        p.mkdir()
    elif content == b"\0unreadable":
        unreadable(write(p, SWEEP))
    elif content is not None:
        write(p, content)
    return ["sweep", str(p), "-o", str(d / "out")], "sw.toml", "("


def _platform_file(d: Path, content: str | bytes | None) -> Built:
    p = d / "plat.toml"
    if content == b"\0folder":
        p.mkdir()
    elif content == b"\0unreadable":
        unreadable(write(p, PLATFORM))
    elif content is not None:
        write(p, content)
    write(d / "s.toml", GOOD.replace('name = "dawning_5000a"', 'name = "plat.toml"'))
    return run_argv(d, d / "s.toml"), "plat.toml", ""


SWEEP = 'base = "base.toml"\n[grid]\n"scenario.ranks" = [4, 8]\n[sweep]\nname = "sw"\nworkers = 1\n'
PLATFORM = (Path(__file__).resolve().parent.parent / "platforms" / "data" / "dawning_5000a.toml").read_text()

_file_level("scenario", _scenario_file, GOOD)
_file_level("sweep", _sweep_file, SWEEP)
_file_level("platform", _platform_file, PLATFORM)


# ----------------------------------------------------------------------------------------------------------------
# Scenario fields: wrong types, out of range, inf/NaN, absurdly large, physics that cannot work
# ----------------------------------------------------------------------------------------------------------------

def _edit(old: str, new: str, field: str, extra: str = "") -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        assert old in GOOD + extra, old
        p = write(d / "s.toml", (GOOD + extra).replace(old, new, 1))
        return run_argv(d, p), "s.toml", field
    return build


SCENARIO_FIELDS: list[tuple[str, str, str, str, str]] = [
    # id, old, new, field, extra text appended to GOOD first
    ("ranks-zero", "ranks = 4", "ranks = 0", "scenario.ranks", ""),
    ("ranks-negative", "ranks = 4", "ranks = -3", "scenario.ranks", ""),
    ("ranks-string", "ranks = 4", 'ranks = "four"', "scenario.ranks", ""),
    ("ranks-float", "ranks = 4", "ranks = 4.5", "scenario.ranks", ""),
    ("ranks-bool", "ranks = 4", "ranks = true", "scenario.ranks", ""),
    ("ranks-inf", "ranks = 4", "ranks = inf", "scenario.ranks", ""),
    ("ranks-nan", "ranks = 4", "ranks = nan", "scenario.ranks", ""),
    ("ranks-huge", "ranks = 4", "ranks = 9223372036854775807", "scenario.ranks", ""),
    ("ranks-array", "ranks = 4", "ranks = [4]", "scenario.ranks", ""),
    ("ranks-missing", "ranks = 4\n", "", "scenario.ranks", ""),
    ("seed-negative", "seed = 7", "seed = -1", "scenario.seed", ""),
    ("seed-float", "seed = 7", "seed = 7.5", "scenario.seed", ""),
    ("seed-string", "seed = 7", 'seed = "x"', "scenario.seed", ""),
    ("name-empty", 'name = "tiny"', 'name = ""', "scenario.name", ""),
    ("name-dotdot", 'name = "tiny"', 'name = ".."', "scenario.name", ""),
    ("name-escape", 'name = "tiny"', 'name = "../../victim"', "scenario.name", ""),
    ("name-absolute", 'name = "tiny"', 'name = "/tmp/victim"', "scenario.name", ""),
    ("name-slash", 'name = "tiny"', 'name = "a/b"', "scenario.name", ""),
    ("name-number", 'name = "tiny"', "name = 5", "scenario.name", ""),
    ("name-long", 'name = "tiny"', f'name = "{"n" * 5000}"', "scenario.name", ""),
    ("scenario-extra-key", "seed = 7", "seed = 7\nsped = 1", "scenario.sped", ""),
    ("scenario-not-table", "[scenario]\n", "scenario = 3\n[x]\n", "scenario", ""),
    ("unknown-section", "[application]", "[aplication]", "aplication", ""),
    ("platform-section-missing", "[platform]\nname = \"dawning_5000a\"\n", "", "platform", ""),
    ("platform-name-missing", 'name = "dawning_5000a"', "nodes = 1", "platform.name", ""),
    ("platform-unknown", 'name = "dawning_5000a"', 'name = "dawning_9000"', "platform.name", ""),
    ("platform-name-number", 'name = "dawning_5000a"', "name = 5000", "platform.name", ""),
    ("platform-nodes-zero", 'name = "dawning_5000a"', 'name = "dawning_5000a"\nnodes = 0', "platform.nodes", ""),
    ("platform-nodes-inf", 'name = "dawning_5000a"', 'name = "dawning_5000a"\nnodes = inf', "platform.nodes", ""),
    ("platform-rpn-huge", 'name = "dawning_5000a"', 'name = "dawning_5000a"\nranks_per_node = 100000',
     "platform.ranks_per_node", ""),
    ("platform-split-string", 'name = "dawning_5000a"', 'name = "dawning_5000a"\nsplit_cores = "yes"',
     "platform.split_cores", ""),
    ("platform-missing-file", 'name = "dawning_5000a"', 'name = "nowhere.toml"', "platform.name", ""),
    # issue r22 (placement): a node past int64, a factor past int64 nanoseconds, settings the placement ignores
    ("placement-node-past-int64", 'name = "dawning_5000a"', 'name = "dawning_5000a"\nplacement = "nodes"\n'
     "placement_nodes = [0, 99999999999999999999, 2, 3]", "platform.placement_nodes", ""),
    ("placement-nodes-extra", 'name = "dawning_5000a"', 'name = "dawning_5000a"\nranks_per_node = 2\n'
     'placement = "nodes"\nplacement_nodes = [1, 2, 3]', "platform.placement_nodes", ""),
    ("placement-nodes-below-list", 'name = "dawning_5000a"', 'name = "dawning_5000a"\nranks_per_node = 2\nnodes = 2\n'
     'placement = "nodes"\nplacement_nodes = [1, 3]', "platform.nodes", ""),
    ("placement-seed-with-block", 'name = "dawning_5000a"', 'name = "dawning_5000a"\nplacement_seed = 4',
     "platform.placement_seed", ""),
    ("placement-supernodes-with-block", 'name = "dawning_5000a"', 'name = "dawning_5000a"\nsupernodes = 3',
     "platform.supernodes", ""),
    ("degraded-factor-tiny", 'name = "dawning_5000a"', 'name = "dawning_5000a"\nsplit_cores = true\n'
     "[[platform.degraded_link]]\nnode = 1\nbandwidth_factor = 1e-15", "bandwidth_factor", ""),
    ("application-missing", '[application]\nkind = "stencil"\nsteps = 3\n', "", "application", ""),
    ("application-kind-missing", 'kind = "stencil"', "", "application.kind", ""),
    ("application-kind-unknown", 'kind = "stencil"', 'kind = "stencl"', "application.kind", ""),
    ("application-kind-number", 'kind = "stencil"', "kind = 3", "application.kind", ""),
    ("steps-zero", "steps = 3", "steps = 0", "steps", ""),
    ("steps-negative", "steps = 3", "steps = -2", "steps", ""),
    ("steps-string", "steps = 3", 'steps = "3"', "steps", ""),
    ("steps-float", "steps = 3", "steps = 3.5", "steps", ""),
    ("steps-nan", "steps = 3", "steps = nan", "steps", ""),
    ("steps-absurd", "steps = 3", "steps = 1000000000", "steps", ""),
    ("steps-int64", "steps = 3", "steps = 9223372036854775807", "steps", ""),
    ("halo-negative", "steps = 3", "steps = 3\nhalo_bytes = -8", "halo_bytes", ""),
    ("halo-inf", "steps = 3", "steps = 3\nhalo_bytes = inf", "halo_bytes", ""),
    ("halo-absurd", "steps = 3", "steps = 3\nhalo_bytes = 1000000000000000000", "halo_bytes", ""),
    ("app-unknown-key", "steps = 3", "steps = 3\nstepz = 4", "stepz", ""),
    ("imbalance-rank-outside", "steps = 3", "steps = 3\n[[application.imbalance]]\nregion = \"Stencil\"\n"
     "ranks = [50]\nmagnitude = 0.001", "imbalance[0].ranks", ""),
    ("imbalance-magnitude-inf", "steps = 3", "steps = 3\n[[application.imbalance]]\nregion = \"Stencil\"\n"
     "ranks = [1]\nmagnitude = inf", "magnitude", ""),
    ("imbalance-magnitude-nan", "steps = 3", "steps = 3\n[[application.imbalance]]\nregion = \"Stencil\"\n"
     "ranks = [1]\nmagnitude = nan", "magnitude", ""),
    ("imbalance-magnitude-negative", "steps = 3", "steps = 3\n[[application.imbalance]]\nregion = \"Stencil\"\n"
     "ranks = [1]\nmagnitude = -1.0", "magnitude", ""),
    ("imbalance-magnitude-absurd", "steps = 3", "steps = 3\n[[application.imbalance]]\nregion = \"Stencil\"\n"
     "ranks = [1]\nmagnitude = 1e300", "magnitude", ""),
    ("imbalance-distribution", "steps = 3", "steps = 3\n[[application.imbalance]]\nregion = \"Stencil\"\n"
     "ranks = [1]\nmagnitude = 0.1\ndistribution = \"cauchy\"", "distribution", ""),
    ("imbalance-not-table", "steps = 3", "steps = 3\nimbalance = 5", "imbalance", ""),
    ("imbalance-random-too-many", "steps = 3", "steps = 3\n[[application.imbalance]]\nregion = \"Stencil\"\n"
     "ranks = { random = 9 }\nmagnitude = 0.1", "imbalance[0].ranks", ""),
    ("timeout-inf", "", "", "simulation.timeout", "[simulation]\ntimeout = inf\n"),
    ("timeout-nan", "", "", "simulation.timeout", "[simulation]\ntimeout = nan\n"),
    ("timeout-negative", "", "", "simulation.timeout", "[simulation]\ntimeout = -1.0\n"),
    ("timeout-absurd", "", "", "simulation.timeout", "[simulation]\ntimeout = 1e12\n"),
    ("alltoall-unknown", "", "", "simulation.alltoall", "[simulation]\nalltoall = \"fastest\"\n"),
    ("sim-config-not-table", "", "", "simulation.config", "[simulation]\nconfig = 3\n"),
    ("sim-config-skip-compute", "", "", "simulation.config",
     "[simulation]\nconfig = { \"smpi/simulate-computation\" = \"no\" }\n"),
    ("sim-config-nan", "", "", "simulation.config", "[simulation]\nconfig = { \"smpi/os\" = nan }\n"),
    ("ref-speed-zero", "", "", "simulation.reference_core_speed", "[simulation]\nreference_core_speed = 0.0\n"),
    ("ref-speed-absurd", "", "", "simulation.reference_core_speed", "[simulation]\nreference_core_speed = 1e300\n"),
    ("sim-unknown-key", "", "", "simulation.speed", "[simulation]\nspeed = 2\n"),
    ("noise-model-unknown", "", "", "noise.model", "[noise]\nmodel = \"loud\"\n"),
    ("noise-detour-longer-than-period", "", "", "noise.duration",
     "[noise]\nmodel = \"periodic\"\nfrequency = 1000.0\nduration = 0.002\n"),
    ("noise-frequency-nan", "", "", "noise.frequency", "[noise]\nmodel = \"periodic\"\nfrequency = nan\n"
     "duration = 1e-5\n"),
    ("noise-duration-missing", "", "", "noise.duration", "[noise]\nmodel = \"periodic\"\nfrequency = 10.0\n"),
    ("noise-unused-key", "", "", "noise.rate", "[noise]\nmodel = \"periodic\"\nfrequency = 10.0\n"
     "duration = 1e-5\nrate = 3.0\n"),
    ("noise-poisson-saturated", "", "", "noise.rate", "[noise]\nmodel = \"poisson\"\nrate = 1e6\nduration = 1e-3\n"),
    ("noise-jitter-inf", "", "", "noise.jitter_std", "[noise]\njitter_std = inf\n"),
    ("noise-scope-bad", "", "", "noise.scope", "[noise]\nscope = \"socket\"\n"),
    ("instr-events-bad", "", "", "instrumentation.events", "[instrumentation]\nevents = \"some\"\n"),
    ("instr-record-negative", "", "", "instrumentation.record_bytes", "[instrumentation]\nrecord_bytes = -1\n"),
    ("instr-record-float", "", "", "instrumentation.record_bytes", "[instrumentation]\nrecord_bytes = 1e30\n"),
    ("instr-payload-over", "", "", "instrumentation.payload", "[instrumentation]\npayload = 2.0\n"),
    ("instr-cost-nan", "", "", "instrumentation.fixed_cost", "[instrumentation]\nfixed_cost = nan\n"),
    ("tracing-policy-bad", "", "", "tracing.policy", "[tracing]\npolicy = \"sometimes\"\n"),
    ("tracing-buffer-absurd", "", "", "tracing.buffer_bytes", "[tracing]\nbuffer_bytes = 1e30\n"),
    ("tracing-buffer-negative", "", "", "tracing.buffer_bytes", "[tracing]\nbuffer_bytes = -5.0\n"),
    ("tracing-buffer-string", "", "", "tracing.buffer_bytes", "[tracing]\nbuffer_bytes = \"1 MB\"\n"),
    ("tracing-every-zero", "", "", "tracing.every", "[tracing]\nevery = 0\n"),
    ("tracing-fill-over", "", "", "tracing.fill_level", "[tracing]\nfill_level = 1.5\n"),
    ("tracing-memory-inf", "", "", "tracing.memory", "[tracing]\nmemory = inf\n"),
]

for _id, _old, _new, _field, _extra in SCENARIO_FIELDS:
    if not _old:
        _old, _new = "[platform]", "[platform]"
    CASES.append(Case("scenario", _id, _edit(_old, _new, _field, _extra)))


# ----------------------------------------------------------------------------------------------------------------
# Platform TOML fields
# ----------------------------------------------------------------------------------------------------------------

def _plat_edit(old: str, new: str, field: str) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        assert old in PLATFORM, old
        write(d / "plat.toml", PLATFORM.replace(old, new, 1))
        write(d / "s.toml", GOOD.replace('name = "dawning_5000a"', 'name = "plat.toml"'))
        return run_argv(d, d / "s.toml"), "plat.toml", field
    return build


PLATFORM_FIELDS = [
    ("cores-zero", "cores = { value = 16,", "cores = { value = 0,", "node.cores"),
    ("cores-string", "cores = { value = 16,", 'cores = { value = "16",', "node.cores"),
    ("speed-negative", "core_speed = { value = 7.6e9,", "core_speed = { value = -7.6e9,", "node.core_speed"),
    ("speed-inf", "core_speed = { value = 7.6e9,", "core_speed = { value = inf,", "node.core_speed"),
    ("speed-nan", "core_speed = { value = 7.6e9,", "core_speed = { value = nan,", "node.core_speed"),
    ("speed-absurd", "core_speed = { value = 7.6e9,", "core_speed = { value = 1e300,", "node.core_speed"),
    ("memory-zero", "memory = { value = 68719476736,", "memory = { value = 0,", "node.memory"),
    ("bandwidth-zero", "bandwidth = { value = 2.5e9,", "bandwidth = { value = 0.0,", "inter_node.bandwidth"),
    ("latency-negative", "latency = { value = 1.6e-6,", "latency = { value = -1.6e-6,", "inter_node.latency"),
    ("no-provenance", "latency = { value = 1.6e-6, source = \"Rao et al. §4.1 (1): MPI latency 1.6 us\" }",
     "latency = { value = 1.6e-6 }", "inter_node.latency"),
    ("bare-number", "latency = { value = 1.6e-6, source = \"Rao et al. §4.1 (1): MPI latency 1.6 us\" }",
     "latency = 1.6e-6", "inter_node.latency"),
    ("topology-kind", 'kind = "fat_tree"', 'kind = "hypercube"', "topology.kind"),
    ("unknown-section", "[machine]", "[machin]", "machin"),
    ("max-nodes-zero", "max_nodes = { value = 1920,", "max_nodes = { value = 0,", "machine.max_nodes"),
    ("taper-zero", "taper = { value = 1.0,", "taper = { value = 0.0,", "topology.taper"),
    ("leaf-float", "leaf_size = { value = 12,", "leaf_size = { value = 12.5,", "topology.leaf_size"),
    ("disk-nan", "bandwidth = { value = 1.0e8,", "bandwidth = { value = nan,", "disk.bandwidth"),
    ("eager-negative", "eager_threshold = { value = 12288,", "eager_threshold = { value = -1,", "eager_threshold"),
    ("mpi-size-string", "{ size = 8, latency", "{ size = \"8\", latency", "inter_node"),
    ("node-missing", "[node]", "[nodez]", "node"),
    # an MPI rate 1000x the 2.5 GB/s link; a figure beyond the largest message SMPI sends (issue r22)
    ("mpi-faster-than-link", "{ size = 1048576, bandwidth = { value = 1.5e9,",
     "{ size = 1048576, bandwidth = { value = 1.5e12,", "mpi.inter_node[1].bandwidth.value"),
    ("mpi-size-over-int", "{ size = 1048576, bandwidth = { value = 1.5e9,",
     "{ size = 4194304000000, bandwidth = { value = 1.5e9,", "mpi.inter_node[1].size"),
]
for _id, _old, _new, _field in PLATFORM_FIELDS:
    CASES.append(Case("platform", f"platform-{_id}", _plat_edit(_old, _new, _field)))


# ----------------------------------------------------------------------------------------------------------------
# Sweep section fields
# ----------------------------------------------------------------------------------------------------------------

def _sweep_text(text: str, field: str, base: str = GOOD) -> Callable[[Path], Built]:
    def build(d: Path) -> Built:
        write(d / "base.toml", base)
        p = write(d / "sw.toml", text)
        return ["sweep", str(p), "-o", str(d / "out")], "sw.toml" if field != "base.toml" else "base.toml", field
    return build


SWEEP_FIELDS = [
    ("no-base", '[grid]\n"scenario.ranks" = [4, 8]\n', "base"),
    ("base-number", 'base = 3\n[grid]\n"scenario.ranks" = [4]\n', "base"),
    ("base-missing-file", 'base = "nope.toml"\n[grid]\n"scenario.ranks" = [4]\n', "base"),
    ("no-grid", 'base = "base.toml"\n', "grid"),
    ("grid-empty", 'base = "base.toml"\n[grid]\n', "grid"),
    ("grid-not-list", 'base = "base.toml"\n[grid]\n"scenario.ranks" = 4\n', "grid.scenario.ranks"),
    ("grid-empty-list", 'base = "base.toml"\n[grid]\n"scenario.ranks" = []\n', "grid.scenario.ranks"),
    ("grid-bad-section", 'base = "base.toml"\n[grid]\n"scenery.ranks" = [4]\n', "scenery.ranks"),
    ("grid-bad-key-part", 'base = "base.toml"\n[grid]\n"scenario.ra nks" = [4]\n', "scenario.ra nks"),
    ("grid-invalid-value", 'base = "base.toml"\n[grid]\n"scenario.ranks" = [4, 0]\n', "grid (scenario.ranks=0)"),
    ("grid-inf", 'base = "base.toml"\n[grid]\n"simulation.timeout" = [inf]\n', "grid (simulation.timeout=inf)"),
    ("grid-index-missing", 'base = "base.toml"\n[grid]\n"application.imbalance[3].magnitude" = [0.1]\n',
     "imbalance[3]"),
    ("grid-repeat", 'base = "base.toml"\n[grid]\n"scenario.ranks" = [4, 4]\n', "grid"),
    ("unknown-top-key", 'base = "base.toml"\nworkers = 2\n[grid]\n"scenario.ranks" = [4]\n', "workers"),
    ("sweep-unknown-key", 'base = "base.toml"\n[grid]\n"scenario.ranks" = [4]\n[sweep]\ncores = 2\n', "sweep.cores"),
    ("workers-string", 'base = "base.toml"\n[grid]\n"scenario.ranks" = [4]\n[sweep]\nworkers = "two"\n',
     "sweep.workers"),
    ("workers-zero", 'base = "base.toml"\n[grid]\n"scenario.ranks" = [4]\n[sweep]\nworkers = 0\n', "sweep.workers"),
    ("workers-absurd", 'base = "base.toml"\n[grid]\n"scenario.ranks" = [4]\n[sweep]\nworkers = 100000\n',
     "sweep.workers"),
    ("executor-bad", 'base = "base.toml"\n[grid]\n"scenario.ranks" = [4]\n[sweep]\nexecutor = "slurm"\n',
     "sweep.executor"),
    ("name-escape", 'base = "base.toml"\n[grid]\n"scenario.ranks" = [4]\n[sweep]\nname = "../x"\n', "sweep.name"),
    ("scheduler-local", 'base = "base.toml"\n[grid]\n"scenario.ranks" = [4]\n[sweep]\nexecutor = "local"\n'
                        'scheduler = "tcp://h:1"\n',
     "scheduler"),
    ("sweep-not-table", 'base = "base.toml"\nsweep = 3\n[grid]\n"scenario.ranks" = [4]\n', "sweep"),
    ("grid-not-table", 'base = "base.toml"\ngrid = [1, 2]\n', "grid"),
    ("base-bad-scenario", 'base = "base.toml"\n[grid]\n"scenario.ranks" = [4]\n', "base.toml"),
]
for _id, _text, _field in SWEEP_FIELDS:
    _base = GOOD.replace("steps = 3", "steps = -3") if _id == "base-bad-scenario" else GOOD
    CASES.append(Case("sweep", f"sweep-{_id}", _sweep_text(_text, _field, _base)))
