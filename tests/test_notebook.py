"""``waitlab.sweep()``, ``waitlab.diagnose()`` and ``waitlab.evaluate()`` from a Jupyter notebook (issue 23).

A notebook is generated and executed by nbclient in a real IPython kernel (ipykernel, the way Jupyter runs it):
a kernel's ``__main__`` cannot be re-imported by a spawned process pool, which once gave an empty table.  It
sweeps a 2-point grid, diagnoses one of its points and evaluates the models on a 1-case suite; each cell prints
what came back, and the test checks the full table, a ground truth and the leaderboard rows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from bad_inputs_corpus import GOOD, write

import waitlab

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

pytestmark = pytest.mark.simgrid

CASE = "imbalance-one-late-16"

CELLS = [
    "import json, os, sys\nimport waitlab\nos.chdir({work!r})\nprint('KERNEL', sys.executable)",
    "table = waitlab.sweep('sw.toml', 'sweep')\n"
    "print('SWEEP', json.dumps({{'rows': len(table), 'steps': sorted(int(s) for s in table['application.steps']),"
    " 'makespan': bool((table['makespan'] > 0).all())}}))\ntable",
    "diag = waitlab.diagnose('sweep/runs/{key}', n_candidates=1, use_cache=False)\n"
    "print('DIAG', json.dumps({{'truth': diag.truth is not None and diag.truth.distinct > 0,"
    " 'models': sorted(m.key for m in diag.models)}}))\ndiag",
    "ev = waitlab.evaluate(only=({case!r},), out='lb', cache_dir='cache', png=False)\n"
    "print('EVAL', json.dumps({{'cases': sorted(set(ev.rows['case'])), 'rows': len(ev.rows),"
    " 'scored': int(ev.rows['top1'].notna().sum())}}))",
]


def _printed(nb: object, tag: str) -> dict:
    for cell in nb.cells:  # type: ignore[attr-defined]
        for out in cell.get("outputs", []):
            for line in out.get("text", "").splitlines():
                if line.startswith(tag + " "):
                    return json.loads(line[len(tag) + 1:])
    raise AssertionError(f"no {tag} line in the notebook's outputs")


def test_sweep_diagnose_and_evaluate_from_a_notebook(tmp_path: Path) -> None:
    write(tmp_path / "g.toml", GOOD.replace("steps = 3", 'steps = 3\n[[application.imbalance]]\n'
                                            'region = "Stencil"\nranks = [1]\nmagnitude = 0.001'))
    write(tmp_path / "sw.toml", 'base = "g.toml"\n[grid]\n"application.steps" = [3, 4]\n[sweep]\nname = "s"\n'
          'workers = 2\n')
    key = waitlab.load_sweep(tmp_path / "sw.toml").points[0].key
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c.format(work=str(tmp_path), key=key, case=CASE)) for c in CELLS]
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError (with the cell's traceback) when a cell fails

    kernel = nb.cells[0]["outputs"][0]["text"]
    assert Path(kernel.split()[1]).resolve() == Path(sys.executable).resolve(), kernel
    assert _printed(nb, "SWEEP") == {"rows": 2, "steps": [3, 4], "makespan": True}
    assert (tmp_path / "sweep" / "sweep.csv").is_file()
    assert any("text/html" in o.get("data", {}) for o in nb.cells[1]["outputs"])  # the table is displayed
    diag = _printed(nb, "DIAG")
    assert diag["truth"] is True and {"cwpdm", "hcwpdm"} <= set(diag["models"])
    ev = _printed(nb, "EVAL")
    assert ev["cases"] == [CASE] and ev["rows"] >= 7 and ev["scored"] == ev["rows"]
    assert (tmp_path / "lb" / "leaderboard.csv").is_file()
