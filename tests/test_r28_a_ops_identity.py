"""The cheaper OpBuilder (scalar arguments kept as one value per block, no per-block copies of defaults, a 16-bit
radix sort, seq from the rank counts) and the application generators give the same OpTables, byte for byte, as the
code of commit 0ec86de (before the change).

The reference is regenerated from that commit itself: its ``models/`` tree is extracted with ``git archive`` and run
in a subprocess whose ``waitlab.models`` is that tree, writing every table to an ``.npz`` file; nothing expected is
stored in the repository.  The same case source (:data:`CASES`) runs in both processes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from waitlab.models.ops import OpTable

REF_COMMIT = "0ec86de08a291cf38a8ae6afaaea86877e429cb8"
REPO = Path(__file__).resolve().parents[1]

#: Defines ``cases() -> dict[str, OpTable]``; executed against the reference tree and against the current one.
CASES = textwrap.dedent('''
    import numpy as np
    from waitlab.models.apps.imbalance import Imbalance
    from waitlab.models.apps.registry import APPLICATIONS, generate
    from waitlab.models.apps.lared_s import LaredSParams
    from waitlab.models.apps.stencil import StencilParams
    from waitlab.models.apps.fft import FftParams
    from waitlab.models.apps.wavefront import WavefrontParams
    from waitlab.models.apps.halo import emit_halo_exchange
    from waitlab.models.ops import OpBuilder


    def builder_cases():
        out = {}
        b = OpBuilder(5)  # partial and full excess hits, 0-d excess, array steps, -0.0, mixed scalars and arrays
        b.add("compute", [0, 1, 2, 3, 4], step=[0, 1, 2, 3, 4], value=[1.0, 2.0, 3.0, 4.0, 5.0],
              excess=[0.0, 0.5, 0.0, 0.25, 0.0], region="a")
        b.add("compute", [4, 2], step=2, value=3.0, excess=0.5, region="b", cause_kind="noise")
        b.add("compute", [1, 3], step=[7, 8], value=[1.0, 2.0], excess=[0.1, 0.2], region="a", cause_kind="swap")
        b.add("compute", 0, value=-0.0, excess=-0.0, region="c")
        b.add("compute", [0, 1], value=[0.0, -0.0], excess=0.0)
        b.add("send", [0, 0, 3], peer=[1, 2, 4], value=8, tag=[1, 2, 3], comm=b.comm_id([0, 1, 2, 3]))
        b.add("recv", [1, 2], peer=0, value=8.0, value2=[1.5, 2.5], tag=np.int64(2))
        b.add("allreduce", np.arange(5), value=8, value2=1.0, step=np.array([1]), comm=b.comm_id([4, 3, 2, 1, 0]))
        b.add("barrier", [2, 2, 1, 2])  # a rank twice in one block keeps its order
        b.add("sleep", [4], value=np.nan, excess=0.0)
        out["builder_mixed"] = b.build()
        b.add("compute", [1], value=1.0, excess=1.0, region="again")  # a second build: the ledger stays
        out["builder_second_build"] = b.build()
        out["builder_empty"] = OpBuilder(3).build()
        big = OpBuilder(70_000)  # ranks beyond 16 bits
        rng = np.random.default_rng(3)
        for s in range(3):
            big.add("compute", np.arange(0, 70_000, 7), step=s, value=rng.random(10_000), excess=rng.random(10_000),
                    region="x")
            big.add("send", rng.integers(0, 70_000, 500), peer=1, value=8, tag=s)
            big.add("allreduce", np.arange(70_000), value=8)
        out["builder_big_ranks"] = big.build()
        h = OpBuilder(12)
        for s in range(2):
            emit_halo_exchange(h, 4, 3, step=s, nbytes=16, periodic=bool(s))
            emit_halo_exchange(h, 2, 6, step=s, nbytes=32.0)
        out["builder_halo"] = h.build()
        return out


    def app_cases():
        out = {}
        specs = (Imbalance("Hydro", ranks={"random": 2}, distribution="normal", magnitude=0.3, redraw=True),
                 Imbalance("EOS_Match>If_970", ranks=[1, 3], distribution="exponential", magnitude=0.2, steps=[0]),
                 Imbalance("Update", ranks={"every": 2}, distribution="linear", magnitude=0.1))
        for kind, cls in APPLICATIONS.items():
            for n in (2, 4, 6, 9, 16):
                if kind == "pingpong" and n % 2:
                    continue
                for seed in (0, 1, 7):
                    out[f"{kind}_{n}_{seed}"] = generate(cls(steps=3), n, seed)
            region = cls.REGIONS[0]
            imb = (Imbalance(region, ranks={"fraction": 0.5}, distribution="uniform", magnitude=0.2, redraw=True),
                   Imbalance(region, ranks=[0], magnitude=0.4, steps=[1]))
            out[f"{kind}_imbalance"] = generate(cls(steps=2, imbalance=imb), 4, 3)
        out["lared_s_specs"] = generate(LaredSParams(steps=2, imbalance=specs, eos_baseline="min"), 12, 5)
        out["lared_s_nohalo"] = generate(LaredSParams(steps=2, halo_bytes=0, grid=(2, 3)), 6, 2)
        for coll in ("allreduce", "barrier", "reduce", "gather", "bcast", "allgather"):
            out[f"stencil_{coll}"] = generate(StencilParams(steps=2, collective=coll, periodic=True), 6, 1)
        for coll in ("allreduce", "barrier", "allgather"):
            for comm in ("row", "column"):
                out[f"stencil_{coll}_{comm}"] = generate(StencilParams(steps=2, dims=2, collective=coll,
                                                                       collective_comm=comm), 6, 1)
        for algo in ("lam_simple", "bruck"):
            out[f"fft_{algo}"] = generate(FftParams(steps=2, alltoall_algorithm=algo), 8, 1)
        out["wavefront_allreduce"] = generate(WavefrontParams(steps=2, allreduce=True), 6, 1)
        for seed in (1, 2):
            out[f"lared_s_1024_{seed}"] = generate(LaredSParams(steps=20), 1024, seed)
        return out


    def cases():
        return {**builder_cases(), **app_cases()}
''')

#: Runs :data:`CASES` with ``waitlab.models`` taken from the directory in argv[1], saving every table in argv[2].
REFERENCE_SCRIPT = textwrap.dedent('''
    import importlib.util, json, sys
    from importlib.machinery import PathFinder
    import numpy as np
    ROOT, OUT = sys.argv[1], sys.argv[2]

    class ReferenceModels:  # ahead of the editable finder, which maps waitlab.models to the working tree
        @classmethod
        def find_spec(cls, fullname, path=None, target=None):
            if fullname == "waitlab.models":
                return importlib.util.spec_from_file_location(fullname, ROOT + "/__init__.py",
                                                              submodule_search_locations=[ROOT])
            if fullname.startswith("waitlab.models."):
                return PathFinder.find_spec(fullname, sys.modules[fullname.rpartition(".")[0]].__path__)
            return None

    sys.meta_path.insert(0, ReferenceModels)
    import waitlab.models.ops
    assert waitlab.models.ops.__file__.startswith(ROOT), waitlab.models.ops.__file__
    ns = {}
    exec(sys.stdin.read(), ns)
    for name, ops in ns["cases"]().items():
        arrays = {c: getattr(ops, c) for c in ops.COLUMNS}
        arrays.update({"ledger_" + c: getattr(ops.ledger, c) for c in ("rank", "region", "step", "seconds", "kind")})
        meta = json.dumps({"n_ranks": ops.n_ranks, "names": list(ops.names), "comms": [list(c) for c in ops.comms]})
        np.savez(f"{OUT}/{name}.npz", meta=np.array(meta), **arrays)
''')


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder of ``<case>.npz`` tables made by the models of :data:`REF_COMMIT`."""
    if shutil.which("git") is None or shutil.which("tar") is None or not (REPO / ".git").exists():
        pytest.skip("needs the git history of the checkout")
    tmp = tmp_path_factory.mktemp("r28a")
    (tmp / "tree").mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", REF_COMMIT, "models"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp / "tree")], input=archive, check=True)
    out = tmp / "tables"
    out.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    subprocess.run([sys.executable, "-c", REFERENCE_SCRIPT, str(tmp / "tree" / "models"), str(out)], input=CASES,
                   text=True, check=True, env=env, cwd=tmp)
    return out


@pytest.fixture(scope="module")
def current() -> dict[str, OpTable]:
    ns: dict[str, Any] = {}
    exec(CASES, ns)
    tables: dict[str, OpTable] = ns["cases"]()
    return tables


def test_every_case_has_a_reference(reference: Path, current: dict[str, OpTable]) -> None:
    assert sorted(p.stem for p in reference.glob("*.npz")) == sorted(current)
    assert len(current) > 100  # every kind, rank count and seed, the builder cases, LARED-S at 1,024 ranks


def test_tables_are_identical_to_the_reference(reference: Path, current: dict[str, OpTable]) -> None:
    for name, ops in current.items():
        with np.load(reference / f"{name}.npz") as ref:
            meta = json.loads(str(ref["meta"]))
            assert ops.n_ranks == meta["n_ranks"], name
            assert list(ops.names) == meta["names"], name
            assert [list(c) for c in ops.comms] == meta["comms"], name
            for c in ops.COLUMNS:
                got, want = getattr(ops, c), ref[c]
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (name, c)
                assert got.flags.c_contiguous and got.flags.writeable, (name, c)
            for c in ("rank", "region", "step", "seconds", "kind"):
                got, want = getattr(ops.ledger, c), ref["ledger_" + c]
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (name, "ledger", c)


def test_the_scenario_table_is_among_the_cases(current: dict[str, OpTable]) -> None:
    ops = current["lared_s_1024_1"]
    assert len(ops) == 568_320 and len(ops.ledger) > 0
