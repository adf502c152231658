"""The way to a run's SMPI stage imports no analysis or report library (issue 25); what it defers is imported after
the stage, when first used (issue 41).

``waitlab run`` from a shell paid 1.9-2.9 s of imports before its SMPI stage: Bokeh, matplotlib and networkx, then
pandas and pyarrow, which only the work after the stage needs.  These tests hold the command line, the platforms and
the way to a program's SMPI stage to not importing them, the lazy names of :mod:`waitlab` and :mod:`waitlab.api` to
resolving; the last ones check that a fresh process writes the same results folder as a warm one (which has
imported everything already), and that a run's ``smpirun`` starts before pandas is imported.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import waitlab
from waitlab import api, api_results, api_studies
from waitlab.cli import build_parser, main
from waitlab.experiments.diagnosis import registry
from waitlab.experiments.diagnosis.names import BUILTIN_NAMES, DEFAULT_DIAGNOSE
from waitlab.experiments.run_folder import PICTURE_MODULES
from waitlab.experiments.scenario import load_scenario
from waitlab.experiments.stage import execute, prepare

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "stencil_late_rank.toml"
BSP = Path(__file__).resolve().parent / "programs" / "bsp.c"
#: What the way to the SMPI stage must not import (2-3 s between them).
HEAVY = ("bokeh", "matplotlib", "networkx", "pandas", "pyarrow", "waitlab.api_results", "waitlab.api_studies",
         "waitlab.experiments.pipeline", "waitlab.experiments.results", *PICTURE_MODULES.values())
#: The report libraries, which no run needs before its SMPI stage.
REPORTS = ("bokeh", "matplotlib", "networkx", "waitlab.api_studies", *PICTURE_MODULES.values())


def fresh(code: str) -> str:
    """The standard output of ``code`` run by a new Python process."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_the_command_line_and_the_way_to_the_smpi_stage_import_no_analysis_or_report_library(tmp_path: Path):
    program = ('[scenario]\nname = "bsp"\nranks = 4\n[platform]\nname = "dawning_5000a"\n[application]\n'
               f'kind = "program"\nsources = ["{BSP}"]\nargs = ["3"]\n')
    code = (f"import sys, waitlab.cli, waitlab.platforms, waitlab.experiments.stage as s\n"
            f"from waitlab import api\n"
            f"waitlab.cli.build_parser()\n"
            f"prep = s.prepare(api.load_scenario({str(tmp_path / 'bsp.toml')!r}))\n"
            f"prep.smpi_config()\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    (tmp_path / "bsp.toml").write_text(program)
    assert fresh(code) == "[]"
    # a replayed source (here a synthetic model) too, and the pipeline, whose end is imported while SMPI runs
    replayed = code.replace(str(tmp_path / "bsp.toml"), str(EXAMPLE)).replace(
        "import sys, ", "import sys, waitlab.experiments.pipeline, waitlab.simulator.replay, ").replace(
        repr(HEAVY), repr(tuple(m for m in HEAVY if m != "waitlab.experiments.pipeline")))
    assert fresh(replayed) == "[]"


def test_import_waitlab_imports_no_api_until_a_name_is_used():
    code = ("import sys, waitlab\nbefore = 'waitlab.api' in sys.modules\nrun = waitlab.run\n"
            "print(before, 'waitlab.api' in sys.modules, run.__module__)")
    assert fresh(code) == "False True waitlab.api"


def test_import_waitlab_then_a_submodule_by_attribute():
    # docs/api.md's block: `import waitlab` then `waitlab.api.compare(...)` (an AttributeError from the lazy
    # __getattr__ when nothing had imported waitlab.api yet)
    code = "import waitlab\nprint(waitlab.api.compare.__module__, waitlab.api is __import__('waitlab.api').api)"
    assert fresh(code) == "waitlab.api_studies True"


def test_every_exported_name_resolves_and_the_lazy_ones_are_the_tools_and_studies():
    for name in waitlab.__all__:
        assert getattr(waitlab, name) is not None, name
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    assert api.LAZY == set(api_results.__all__) | set(api_studies.__all__)
    assert not set(api_results.__all__) & set(api_studies.__all__)  # each lazy name has one home
    assert api.diagnose is api_studies.diagnose and waitlab.diagnose is api_studies.diagnose
    assert api.load_run is api_results.load_run and waitlab.check_c is api_results.check_c
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        _ = api.nonesuch  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        _ = waitlab.nonesuch  # type: ignore[attr-defined]


def test_the_names_of_the_builtin_models_are_the_registry_s():
    assert list(registry.BUILTIN) == list(BUILTIN_NAMES)  # every named model has its functions, in report order
    assert set(DEFAULT_DIAGNOSE) <= set(registry.BUILTIN)
    # the command line's --model help, built without the registry, lists every model the registry runs
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("diagnose", "sweep", "evaluate"):
        model = next(a for a in sub.choices[command]._actions if "--model" in a.option_strings)
        assert all(key in str(model.help) for key in registry.BUILTIN), command


@pytest.mark.simgrid
@pytest.mark.parametrize("png", [True, False])
def test_a_fresh_process_writes_the_same_folder_as_a_warm_one(tmp_path: Path, png: bool):
    cold, warm = tmp_path / "cold", tmp_path / "warm"
    flags = ["--png"] if png else []  # timeline.png is drawn only when asked
    code = ("import threading\nfrom waitlab.cli import main\n"
            f"rc = main(['run', {str(EXAMPLE)!r}, '-o', {str(cold)!r}, '--quiet', *{flags!r}])\n"
            "print(rc, sorted(t.name for t in threading.enumerate()))")
    assert fresh(code) == "0 ['MainThread']"  # no thread outlives the command
    assert main(["run", str(EXAMPLE), "-o", str(warm), "--quiet", *flags]) == 0  # this process: already imported
    files = {p.relative_to(cold) for p in cold.rglob("*") if p.is_file()}
    assert files == {p.relative_to(warm) for p in warm.rglob("*") if p.is_file()}
    assert {"report.html", *(["timeline.png"] if png else [])} <= {str(f) for f in files}
    assert png or "timeline.png" not in {str(f) for f in files}
    differ = sorted(str(f) for f in files if (cold / f).read_bytes() != (warm / f).read_bytes())
    assert differ == ["timing.json"]


@pytest.mark.simgrid
@pytest.mark.parametrize("kind", ["program", "replay"])
def test_smpirun_starts_before_pandas_and_the_reports_are_imported(tmp_path: Path, kind: str):
    """From a shell, a run's ``smpirun`` (a program's, a synthetic model's replay) is launched before pyarrow, the
    results writer or a report library is imported: the pipeline's end and the writer are imported while SMPI runs
    (:data:`waitlab.experiments.pipeline.AFTER_STAGE`), and by the time it ends; the results folder is complete;
    matplotlib is never imported without ``--png``, and pandas never (a run's tables are Arrow tables)."""
    (tmp_path / "bsp.toml").write_text('[scenario]\nname = "bsp"\nranks = 4\n[platform]\nname = "dawning_5000a"\n'
                                       f'[application]\nkind = "program"\nsources = ["{BSP}"]\nargs = ["20"]\n')
    scenario = tmp_path / "bsp.toml" if kind == "program" else EXAMPLE
    later = ("pandas", "pyarrow", "waitlab.experiments.results", *REPORTS)
    code = ("import json, subprocess, sys\nseen = {}\n"
            "class Spy(subprocess.Popen):\n"
            "    def __init__(self, cmd, *a, **k):\n"
            "        if 'smpirun' in str(cmd[0]) and '-np' in cmd:  # the simulation, not `smpirun -version`\n"
            f"            seen.setdefault('heavy', sorted(m for m in {later!r} if m in sys.modules))\n"
            "        super().__init__(cmd, *a, **k)\n"
            "    def wait(self, *a, **k):\n"
            "        if 'smpirun' in str(self.args[0]) and '-np' in self.args:\n"
            "            seen.setdefault('after', 'waitlab.experiments.results' in sys.modules)\n"
            "        return super().wait(*a, **k)\n"
            "subprocess.Popen = Spy\nfrom waitlab.cli import main\n"
            f"rc = main(['run', {str(scenario)!r}, '-o', {str(tmp_path / 'out')!r}, '--quiet'])\n"
            "print(json.dumps({'rc': rc, **seen, 'matplotlib': 'matplotlib' in sys.modules, "
            "'pandas': 'pandas' in sys.modules}))")
    assert json.loads(fresh(code)) == {"rc": 0, "heavy": [], "after": True, "matplotlib": False, "pandas": False}
    written = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"report.html", "events.parquet", "run.json"} <= written
    assert "timeline.png" not in written  # not asked for (--png)


@pytest.mark.simgrid
def test_work_done_while_smpi_runs_is_not_counted_as_smpi_s_time():
    """``on_start`` runs once, while SMPI runs; the stage's seconds end when SimGrid's output ended, not when the
    caller's work did (here a 3 s sleep against an SMPI stage of about 0.1 s)."""
    calls = []

    def slow() -> None:
        calls.append(time.perf_counter())
        time.sleep(3.0)

    t = time.perf_counter()
    ex = execute(prepare(load_scenario(EXAMPLE)), on_start=slow)
    elapsed = time.perf_counter() - t
    assert len(calls) == 1 and elapsed >= 3.0
    assert ex.stage_seconds["smpi"] < elapsed - 1.0  # SMPI's own time, not the sleep
    assert len(ex.events) > 0


def test_the_command_turns_pydantic_s_plugin_search_off_unless_told_and_the_library_leaves_it_alone():
    """``waitlab.entry`` (the ``waitlab`` script, ``python -m waitlab``) sets ``PYDANTIC_DISABLE_PLUGINS`` when it is
    unset (pydantic then skips its search of every distribution's entry points), keeps a value the user set, and
    ``import waitlab`` / ``waitlab.cli`` in a user's program set nothing."""
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    show = "import os, sys; {}; print(repr(os.environ.get('PYDANTIC_DISABLE_PLUGINS')))"
    for code, want in [(show.format("import waitlab.entry"), "'__all__'"),
                       (show.format("os.environ['PYDANTIC_DISABLE_PLUGINS'] = ''; import waitlab.entry"), "''"),
                       (show.format("import waitlab, waitlab.cli, waitlab.api"), "None")]:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == want, (code, out.stdout, out.stderr[-500:])
    version = subprocess.run([sys.executable, "-m", "waitlab", "--version"], capture_output=True, text=True, env=env,
                             timeout=120)
    assert version.returncode == 0 and version.stdout.startswith("waitlab "), version.stderr[-500:]


def test_a_command_whose_output_reader_went_away_ends_quietly():
    """``waitlab ... | head``: the reader closes the pipe; the command ends with 128 + SIGPIPE, as shell tools do,
    without a traceback (the output's first write raised BrokenPipeError)."""
    proc = subprocess.Popen([sys.executable, "-m", "waitlab", "platforms"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the command's first line: it takes half a second to start
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 128 + signal.SIGPIPE and "Traceback" not in err, err


INTERRUPT_WHILE_IMPORTING = """
import importlib.abc, os, signal, sys

class Interrupt(importlib.abc.MetaPathFinder):  # a Ctrl-C while the command imports its modules
    def find_spec(self, name, path, target=None):
        if name == "waitlab.cli":
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["waitlab", "platforms"]
from waitlab.entry import main
print("not reached")
main()
"""


def test_a_ctrl_c_while_the_command_imports_its_modules_ends_it_without_a_traceback():
    """Tester t5 of session 26: a Ctrl-C in the first 0.3 s of any command printed a 45-line traceback (the signal
    arrived while ``waitlab.entry`` imported the command's modules, before any handler); it now ends the process at
    once with 128 + SIGINT, as before and after a command's session."""
    out = subprocess.run([sys.executable, "-c", INTERRUPT_WHILE_IMPORTING], capture_output=True, text=True,
                         timeout=120)
    assert (out.returncode, out.stdout, out.stderr) == (128 + signal.SIGINT, "", ""), out
