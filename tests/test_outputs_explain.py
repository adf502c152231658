"""Outputs that explain themselves (issue 26): each item a new user tripped on, checked."""

from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from waitlab import api, cli
from waitlab.experiments.reproduce.okita_spilling import OkitaResult
from waitlab.models.analysis.waitstates import make_events, wait_states
from waitlab.simulator import doctor as doc
from waitlab.simulator.chrome_trace import chrome_trace_text

ROOT = Path(__file__).resolve().parents[1]
#: C0 control characters other than tab, newline and carriage return, and DEL.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def test_no_control_characters_in_docs_and_examples():
    files = [*ROOT.glob("docs/**/*.md"), *ROOT.glob("docs/**/*.py"), ROOT / "README.md",
             *ROOT.glob("examples/*.toml"), *ROOT.glob("docs/**/*.ipynb")]
    files = [f for f in files if "_build" not in f.parts and "_generated" not in f.parts]
    bad = [f"{f.relative_to(ROOT)}:{i}: {line!r}" for f in files
           for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if CONTROL.search(line)]
    assert len(files) > 20 and bad == []
    assert "\\varphi$ from its share" in (ROOT / "docs" / "diagnosis.md").read_text()  # the vertical tab was \v


def test_python_dash_m_waitlab():
    out = subprocess.run([sys.executable, "-m", "waitlab", "--version"], capture_output=True, text=True,
                         check=False, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("waitlab ")


def test_platforms_list_sources_and_no_old_aliases(capsys):
    assert cli.main(["platforms"]) == 0
    text = capsys.readouterr().out
    assert "seed000_cluster" not in text and "seed003_myrinet" not in text
    assert "    sources: Rao et al." in text and "    sources: Okita et al." in text
    assert cli.main(["platforms", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    names = [d["name"] for d in listing]
    assert "dawning_5000a" in names and "wu_cluster" in names and "seed000_cluster" not in names
    assert all(d["sources"] and d["sourced"] + d["assumed"] > 0 for d in listing)
    assert cli.main(["platforms", "seed000_cluster", "--json"]) == 0  # the old name still loads
    assert json.loads(capsys.readouterr().out)["name"] == "wu_cluster"


def test_plot_json(tmp_path: Path, capsys):
    rows = [{"simulation.alltoall": a, "scenario_hash": f"h{a}", "makespan": 1.0, "total_wait": 0.5,
             "max_rank_wait": 0.1} for a in ("ring", "bruck")]
    pd.DataFrame(rows).to_csv(tmp_path / "sweep.csv", index=False)
    assert cli.main(["plot", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["picture"] == str(tmp_path / "sweep.png")


def test_chrome_slices_carry_peer_bytes_tag_and_injected_excess():
    ev = make_events(rank=[0, 0, 1, 1], op=["compute", "send", "compute", "recv"], enter=[0, 3, 0, 1],
                     exit=[3, 3, 1, 3], match=[-1, 0, -1, 0], done=[-1, 1, -1, 3], peer=[-1, 1, -1, 0])
    ev["bytes"] = [0, 800, 0, 0]
    ev["tag"] = [-1, 7, -1, 7]
    ev["excess"] = [2.0, 0.0, 0.0, 0.0]
    trace = json.loads(chrome_trace_text(ev, wait_states(ev), {"scenario": "t"}))
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] != "wait"]
    args = {(e["tid"], e["name"]): e["args"] for e in slices}
    assert args[(0, "compute")] == {"step": 0, "injected_excess_s": 2.0}
    assert args[(0, "send")] == {"step": 0, "peer": 1, "bytes": 800, "tag": 7}
    assert args[(1, "recv")] == {"step": 0, "peer": 0, "tag": 7}
    # a wait's slice names the rank waited for (docs/outputs.md, "The slices of trace.json"); times are JSON numbers
    waits = [(e["tid"], e["name"], e["args"]) for e in trace["traceEvents"] if e.get("cat") == "wait"]
    assert waits == [(1, "wait: late_sender", {"peer_rank": 0})]
    assert all(isinstance(e["ts"], float) for e in trace["traceEvents"] if e["ph"] == "X")


def test_scenario_from_stdin(tmp_path: Path, monkeypatch):

    monkeypatch.setattr(sys, "stdin", io.StringIO('[scenario]\nname = "from-stdin"\nranks = 4\n[platform]\n'
                                                  'name = "dawning_5000a"\n[application]\nkind = "stencil"\n'))

    assert api.load_scenario("-").name == "from-stdin"
    monkeypatch.setattr(sys, "stdin", io.StringIO("[scenario\n"))
    with pytest.raises(Exception, match=r"\(stdin\).*not valid TOML"):
        api.load_scenario("-")


@pytest.mark.simgrid
def test_a_new_users_session(tmp_path: Path, capsys):
    run = tmp_path / "R"
    assert cli.main(["run", "-q", str(ROOT / "examples" / "stencil_late_rank.toml"), "-o", str(run)]) == 0
    # compare a run with itself: identical, and nothing listed as moved
    assert cli.main(["compare", str(run), str(run), "--json"]) == 0
    out = capsys.readouterr().out
    cmp = json.loads(out)
    assert cmp["identical"] is True and out.count("\n") < 30
    assert all(cmp[k] == [] for k in ("totals", "wait_by_pattern", "wait_by_region", "ranks_wait_moved",
                                      "ranks_own_work_moved", "steps_moved"))
    assert cli.main(["compare", str(run), str(run)]) == 0
    assert "identical: " in capsys.readouterr().out
    # check-c says what it counted and how to change it
    cli.main(["check-c", str(run)])
    text = capsys.readouterr().out
    assert "counted as overhead: event kinds overhead, swap, flush, delay" in text and "--kinds" in text
    # diagnose: one spelling of the top level
    assert cli.main(["diagnose", str(run), "--no-png"]) == 0
    text = capsys.readouterr().out
    assert "(top)" not in text and "(A candidate's true cost is the total wait minus" in text
    assert (run / "report.html").is_file()
    # the API's objects render in a notebook

    loaded = api.load_run(run)
    assert f"{len(loaded.events):,} events" in loaded._repr_html_()
    diag = api.diagnose(run)
    page = diag._repr_html_()
    assert "CWP-DM" in page and "ground truth (counterfactual re-runs)" in page and "Stencil" in page
    # report.html rebuilt from the folder is what diagnose wrote
    written = (run / "report.html").read_bytes()
    assert cli.main(["report", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["report"] == str(run / "report.html")
    assert (run / "report.html").read_bytes() == written


def test_calibration_table_fits_120_columns_and_explains_them():

    sources = ["Rao et al. §4.1 (1): MPI latency 1.6 us and a long explanation " * 3,
               "assumed: shared-memory MPI of that generation, no figure in the paper " * 3]
    table = pd.DataFrame([{"path": p, "size": s, "kind": k, "figure": 1.6e-6, "provenance": src, "source_s": 1.6e-6,
                           "simulated_s": 1.61e-6, "rel_error": 0.00625, "default_s": 3.2e-6, "default_rel_error": 1.0}
                          for p, src in zip(("inter_node", "intra_node"), sources, strict=True)
                          for s, k in ((1, "latency"), (4194304, "bandwidth"))])
    text = api.calibration_text(table)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 120
    assert lines[0].startswith("fit check, not a validation")  # the rows are the figures the factors are fitted to
    header = lines[1].split()
    assert header == list(api.CALIBRATION_COLUMNS)
    assert all(f"  {c}: " in text for c in header)  # every column explained
    assert "+0.6%" in lines[2] and "+100.0%" in lines[2] and lines[4].split()[-3] == "ASSUMED"
    assert lines[4].rstrip().endswith("fit target")


@pytest.mark.simgrid
def test_doctor_notes_missing_bindings_without_failing(monkeypatch, capsys):

    real = doc.subprocess.run

    def run(args, *a, **k):  # the bindings are missing (a plain pip install): both imports fail
        if any("import simgrid" in str(x) for x in args):
            return subprocess.CompletedProcess(args, 1, "", "ModuleNotFoundError: No module named 'simgrid'")
        return real(args, *a, **k)

    monkeypatch.setattr(doc.subprocess, "run", run)
    rc = doc.doctor()
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "python3-simgrid" in x)
    assert line.startswith("[note]") and "optional" in line and "not installed" in line
    assert rc == (1 if "[FAIL]" in out else 0)


def _text_after(markdown: str, command: str) -> list[str]:
    """The lines of the ```text block that follows the code block holding ``command``."""
    at = markdown.index(command)
    block = markdown.index("```text\n", at) + len("```text\n")
    return markdown[block:markdown.index("```", block)].strip("\n").splitlines()


@pytest.mark.simgrid
def test_tutorial_outputs_are_what_the_code_prints(tmp_path: Path):
    """The printed outputs of the tutorial (run, diagnose with an empty cache, compare) and of the quick start's
    demo are what this code prints for their commands, run as written from a folder holding ``examples/`` (a line
    ending in ``...`` is compared up to the dots, a line ``...`` stands for lines left out)."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")

    def waitlab(*args: str) -> list[str]:
        return subprocess.run([sys.executable, "-m", "waitlab", *args], cwd=tmp_path, capture_output=True, text=True,
                              check=True, timeout=600).stdout.splitlines()

    late = waitlab("run", "examples/stencil_late_rank.toml", "-o", "results/late", "--png", "--chrome")
    diagnosis = waitlab("diagnose", "results/late", "--cache", str(tmp_path / "cache"))  # empty: 1 re-run simulated
    text = (ROOT / "examples" / "stencil_late_rank.toml").read_text()
    (tmp_path / "balanced.toml").write_text(text[:text.index("[[application.imbalance]]")]
                                            .replace("stencil-late-rank", "stencil-balanced"))
    waitlab("run", "-q", "balanced.toml", "-o", "results/balanced")
    cmp = waitlab("compare", "results/balanced", "results/late", "--png", "results/compare.png")
    demo = waitlab("run", "examples/lared_s_dawning.toml", "-o", "results/demo", "--force")
    tutorial = (ROOT / "docs" / "tutorial.md").read_text(encoding="utf-8")
    quickstart = (ROOT / "docs" / "quickstart.md").read_text(encoding="utf-8")
    for md, command, printed in (
            (tutorial, ".venv/bin/waitlab run examples/stencil_late_rank.toml -o results/late --png --chrome --force\n",
             late),
            (tutorial, ".venv/bin/waitlab diagnose results/late\n", diagnosis),
            (tutorial, ".venv/bin/waitlab compare results/balanced results/late --png results/compare.png\n", cmp),
            (quickstart, "make demo\n", demo)):
        shown = _text_after(md, command)
        assert len(shown) >= 7, command
        for line in shown:
            assert any(p == line or (line.endswith("...") and p.startswith(line[:-3])) for p in printed), line
    # whole blocks where nothing is left out: every line printed is shown, in order
    assert _text_after(tutorial, "-o results/late --png --chrome --force\n") == late
    assert _text_after(quickstart, "make demo\n") == demo
    assert _text_after(tutorial, "results/late --png results/compare.png\n") == cmp
    # the prose's figures: 15 ranks x 0.05 s x 10 steps of wait, and removing rank 5's extra work (the balanced run)
    # saves "a third of the makespan"
    assert "15 x 0.05 s = 0.75 s per step, 7.5 s in\n10 steps" in tutorial
    span = {k: json.loads((tmp_path / "results" / k / "summary.json").read_text())["makespan"]
            for k in ("late", "balanced")}
    assert "and a third of the makespan" in tutorial
    assert (span["late"] - span["balanced"]) / span["late"] == pytest.approx(1 / 3, abs=0.01)
    # the lines the diagnose block shows appear in the order waitlab prints them
    at = 0
    for line in (x for x in _text_after(tutorial, ".venv/bin/waitlab diagnose results/late\n") if x != "..."):
        found = [i for i in range(at, len(diagnosis)) if diagnosis[i] == line
                 or (line.endswith("...") and diagnosis[i].startswith(line[:-3]))]
        assert found, f"not printed after line {at}: {line}"
        at = found[0] + 1


def test_setup_names_every_importable_folder_so_setuptools_does_not_warn():
    """setuptools warns (about 90 lines per `make demo`) for every folder inside a package that Python could
    import but ``packages`` does not name; setup.py names them all."""

    call = next(n for n in ast.walk(ast.parse((ROOT / "setup.py").read_text())) if isinstance(n, ast.Call))
    kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    packages, package_dir = set(kw["packages"]), kw["package_dir"]
    missing = []
    for pkg in packages:
        for sub in (ROOT / package_dir[pkg]).iterdir():
            name = f"{pkg}.{sub.name}"
            if sub.is_dir() and sub.name.isidentifier() and name not in packages and sub.name != "__pycache__" \
                    and any(f.is_file() for f in sub.iterdir()):
                missing.append(name)
    assert missing == []


def test_okita_report_defines_s_si_sf_before_its_table():
    """`reproduce okita-spilling` prints S, S_i and S_f with their meaning (Okita et al. section 4.1)."""
    row = {"R_MB": 128, "S_paper": 2.65, "S_ours": 2.6, "S_i_paper": 3.11, "S_i_ours": 3.0, "S_f_paper": 3.09,
           "S_f_ours": 3.1}
    text = OkitaResult(pd.DataFrame([row]), pd.DataFrame(), {}, {}, 0.0).markdown()
    first, table = text.split("\n\n", 1)
    for name, meaning in (("S:", "without instrumentation"), ("S_i:", "kept in memory"),
                          ("S_f:", "swap-out function f")):
        assert name in first and meaning in first
    # the worst error of the row is by hand max(|2.6/2.65 - 1|, |3.0/3.11 - 1|, |3.1/3.09 - 1|) = 3.5%
    assert table.splitlines()[2].endswith("| 3.5% |")
