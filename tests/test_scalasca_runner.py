"""The Scalasca runner without Scalasca (issue 38): where it is looked for, and how its failures read.

A fake installation prefix (shell scripts named ``mpirun`` and ``scout.mpi``) stands in for Scalasca, so these
run everywhere, in milliseconds; ``tests/test_scalasca.py`` runs the real one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from waitlab.errors import EnvironmentProblem, SimulationError
from waitlab.experiments.diagnosis.scalasca_models import scalasca_specs
from waitlab.simulator.scalasca import find_scalasca, run_scout


def _fake_prefix(root: Path, scout_body: str) -> Path:
    """A prefix whose ``mpirun`` drops its options and runs the program, and whose ``scout.mpi`` is ``scout_body``."""
    bin_ = root / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "mpirun").write_text('#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do [ "$1" = -np ] && shift; shift; done\n'
                                 'exec "$@"\n')
    (bin_ / "scout.mpi").write_text("#!/bin/sh\n" + scout_body + "\n")
    for f in bin_.iterdir():
        f.chmod(0o755)
    return root


@pytest.fixture
def no_scalasca(monkeypatch, tmp_path):
    """No WAITLAB_SCALASCA, no scout.mpi on PATH, an empty cache."""
    monkeypatch.delenv("WAITLAB_SCALASCA", raising=False)
    monkeypatch.setenv("WAITLAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                               if not (Path(p) / "scout.mpi").exists()))


def test_not_found_says_how_to_get_it(no_scalasca):
    prefix, reason = find_scalasca()
    assert prefix is None
    assert "WAITLAB_SCALASCA" in reason and "scripts/build_scalasca.sh" in reason
    specs, why = scalasca_specs()  # evaluate --scalasca prints this reason in one line and skips the rows
    assert specs == [] and why == reason


def test_found_through_the_variable_path_and_cache_in_that_order(no_scalasca, monkeypatch, tmp_path):
    env = _fake_prefix(tmp_path / "env", "exit 0")
    on_path = _fake_prefix(tmp_path / "path", "exit 0")
    cached = _fake_prefix(tmp_path / "cache" / "scalasca-2.6", "exit 0")
    assert find_scalasca()[0] is None  # the cache's copy counts only once its build finished (stamp file)
    (cached / ".waitlab-built").touch()
    assert find_scalasca()[0] == cached
    monkeypatch.setenv("PATH", f"{on_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert find_scalasca()[0] == on_path.resolve()
    monkeypatch.setenv("WAITLAB_SCALASCA", str(env))
    assert find_scalasca()[0] == env
    monkeypatch.setenv("WAITLAB_SCALASCA", str(tmp_path / "nowhere"))
    prefix, reason = find_scalasca()
    assert prefix is None and "has no bin/scout.mpi" in reason


def test_scout_failure_is_one_line_quoting_scout(tmp_path):
    prefix = _fake_prefix(tmp_path / "p", 'echo "Analyzing trace data"; echo "ABORT: no archive here" >&2; exit 3')
    anchor = tmp_path / "a" / "traces.otf2"
    anchor.parent.mkdir()
    anchor.write_bytes(b"")
    with pytest.raises(SimulationError) as err:
        run_scout(anchor, 2, prefix=prefix, timeout=60)
    msg = str(err.value)
    assert "\n" not in msg and "exit 3" in msg and "ABORT: no archive here" in msg and str(anchor) in msg
    with pytest.raises(EnvironmentProblem, match="no such OTF2 anchor"):
        run_scout(tmp_path / "missing" / "traces.otf2", 2, prefix=prefix)


def test_scout_past_its_time_is_stopped_with_its_children(tmp_path):
    marker = tmp_path / "child-alive"
    prefix = _fake_prefix(tmp_path / "p", f'(sleep 3; touch "{marker}") & sleep 60')
    anchor = tmp_path / "a" / "traces.otf2"
    anchor.parent.mkdir()
    anchor.write_bytes(b"")
    t0 = time.monotonic()
    with pytest.raises(SimulationError, match="ran longer than 1 s"):
        run_scout(anchor, 2, prefix=prefix, timeout=1)
    assert time.monotonic() - t0 < 20
    time.sleep(3)
    assert not marker.exists()  # the whole process group was killed, not only mpirun
