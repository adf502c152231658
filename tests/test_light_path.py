"""The way to a run's SMPI stage imports no analysis or report library, and what it defers is imported while SMPI runs
(issue 25).

``waitlab run`` from a shell paid 1.9-2.9 s of imports before its SMPI stage: Bokeh, matplotlib and networkx, then
pandas and pyarrow, which only the work after the stage needs.  These tests hold the command line, the platforms and
the way to a program's SMPI stage to not importing them, the lazy names of :mod:`waitlab` and :mod:`waitlab.api` to
resolving, and :func:`waitlab.experiments.preload.preloading` to its contract; the last ones check that a fresh
process (which preloads) writes the same results folder as a warm one (which does not), and that a program's
``smpirun`` starts before pandas is imported.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import waitlab
from waitlab import api, api_results, api_studies
from waitlab.cli import build_parser, main
from waitlab.experiments import pipeline, preload
from waitlab.experiments.diagnosis import registry
from waitlab.experiments.diagnosis.names import BUILTIN_NAMES, DEFAULT_DIAGNOSE
from waitlab.experiments.run_folder import PICTURE_MODULES, picture_modules
from waitlab.simulator import progress

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "stencil_late_rank.toml"
BSP = Path(__file__).resolve().parent / "programs" / "bsp.c"
#: What the way to the SMPI stage must not import (2-3 s between them).
HEAVY = ("bokeh", "matplotlib", "networkx", "pandas", "pyarrow", "waitlab.api_results", "waitlab.api_studies",
         *api.AFTER_STAGE, *PICTURE_MODULES.values())


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
    # a replayed source (here a synthetic model) needs the replay's event table, pandas, but no report library
    reports = ("bokeh", "matplotlib", "networkx", "waitlab.api_studies", *PICTURE_MODULES.values())
    replayed = code.replace(str(tmp_path / "bsp.toml"), str(EXAMPLE)).replace(repr(HEAVY), repr(reports))
    assert fresh(replayed) == "[]"


def test_import_waitlab_imports_no_api_until_a_name_is_used():
    code = ("import sys, waitlab\nbefore = 'waitlab.api' in sys.modules\nrun = waitlab.run\n"
            "print(before, 'waitlab.api' in sys.modules, run.__module__)")
    assert fresh(code) == "False True waitlab.api"


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


@pytest.fixture
def probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module that records which thread imported it (a new name each test: never imported before)."""
    name = f"waitlab_probe_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("import threading\nTHREAD = threading.current_thread().name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def test_preloading_imports_on_its_thread_once_an_smpi_process_has_started(probe: str):
    with preload.preloading([probe]):
        assert probe not in sys.modules  # nothing before the stage: it would take the lock from that work
        progress.launched()
        progress.launched()  # a second SMPI stage (a perturbed run has two) starts no second thread
    assert sys.modules[probe].THREAD == "waitlab-preload"  # joined: imported, on the preload thread


def test_preloading_then_runs_on_its_thread_after_the_imports_and_keeps_its_errors_there(probe: str):
    calls: list[tuple[str, bool]] = []

    def then() -> None:
        calls.append((threading.current_thread().name, probe in sys.modules))
        raise RuntimeError("made again where it is used")

    with preload.preloading([probe], then=then):
        progress.launched()
    assert calls == [("waitlab-preload", True)]  # after the imports, on the thread; its error stayed there
    with preload.preloading([probe], then=then):  # the modules imported already: still run, once a stage starts
        progress.launched()
    assert len(calls) == 2


def test_preloading_ends_with_a_full_collection_on_its_thread(probe: str):
    """The imports' objects are scanned once while SMPI runs, not by the first full collection after the stage."""
    full: list[str] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(threading.current_thread().name)

    gc.callbacks.append(seen)
    try:
        with preload.preloading([probe]):
            progress.launched()
    finally:
        gc.callbacks.remove(seen)
    assert "waitlab-preload" in full


def test_preloading_without_an_smpi_stage_imports_nothing(probe: str):
    with preload.preloading([probe]):
        pass
    assert probe not in sys.modules
    progress.launched()  # outside the block: no one listens
    assert probe not in sys.modules


def test_preloading_a_missing_module_leaves_the_error_to_the_place_that_uses_it(probe: str):
    with preload.preloading(["waitlab_no_such_module", probe]):
        progress.launched()
    assert probe not in sys.modules  # stopped at the first failure, quietly
    with pytest.raises(ModuleNotFoundError):
        __import__("waitlab_no_such_module")


def test_preloading_an_interrupted_block_does_not_wait(probe: str):
    with pytest.raises(KeyboardInterrupt), preload.preloading([probe]):
        progress.launched()
        raise KeyboardInterrupt


@pytest.mark.simgrid
@pytest.mark.parametrize("png", [True, False])
def test_a_fresh_process_preloads_during_smpi_and_writes_the_same_folder_as_a_warm_one(tmp_path: Path, png: bool):
    cold, warm = tmp_path / "cold", tmp_path / "warm"
    flags = [] if png else ["--no-png"]
    code = ("import json, sys, threading\nfrom waitlab.experiments import preload\nseen = {}\n"
            "real = preload._import_all\n"
            "def spy(mods, then=None):\n    seen.update(thread=threading.current_thread().name, modules=list(mods))\n"
            "    real(mods, then)\n"
            "preload._import_all = spy\nfrom waitlab.cli import main\n"
            f"rc = main(['run', {str(EXAMPLE)!r}, '-o', {str(cold)!r}, '--quiet', *{flags!r}])\n"
            "print(json.dumps({'rc': rc, **seen}))")
    seen = json.loads(fresh(code))
    assert seen == {"rc": 0, "thread": "waitlab-preload", "modules": [*api.AFTER_STAGE, *picture_modules(png)]}
    assert main(["run", str(EXAMPLE), "-o", str(warm), "--quiet", *flags]) == 0  # this process: already imported
    files = {p.relative_to(cold) for p in cold.rglob("*") if p.is_file()}
    assert files == {p.relative_to(warm) for p in warm.rglob("*") if p.is_file()}
    assert {"report.html", *(["timeline.png"] if png else [])} <= {str(f) for f in files}
    assert png or "timeline.png" not in {str(f) for f in files}
    differ = sorted(str(f) for f in files if (cold / f).read_bytes() != (warm / f).read_bytes())
    assert differ == ["timing.json"]


@pytest.mark.simgrid
def test_a_program_s_smpirun_starts_before_pandas_is_imported(tmp_path: Path):
    """From a shell, a program run's ``smpirun`` is launched with none of :data:`HEAVY` imported; they are imported
    on the preload thread while it runs, and the results folder is complete."""
    (tmp_path / "bsp.toml").write_text('[scenario]\nname = "bsp"\nranks = 4\n[platform]\nname = "dawning_5000a"\n'
                                       f'[application]\nkind = "program"\nsources = ["{BSP}"]\nargs = ["20"]\n')
    code = ("import json, sys\nfrom waitlab.simulator import progress\nseen = {}\nreal = progress.launched\n"
            "def spy():\n"
            f"    seen.setdefault('heavy', sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
            "    real()\n"
            "progress.launched = spy\nfrom waitlab.cli import main\n"
            f"rc = main(['run', {str(tmp_path / 'bsp.toml')!r}, '-o', {str(tmp_path / 'out')!r}, '--quiet'])\n"
            "print(json.dumps({'rc': rc, **seen}))")
    assert json.loads(fresh(code)) == {"rc": 0, "heavy": []}
    written = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"report.html", "timeline.png", "events.parquet", "run.json"} <= written


def test_the_pipeline_finishes_a_first_stage_only_of_the_source_s_own_operations():
    sc = api.load_scenario(EXAMPLE)
    with pytest.raises(ValueError, match="first"):  # refused before anything runs
        pipeline.run(sc, prep=api.prepare(sc), first=object(), ops=object())


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
