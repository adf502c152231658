"""The native build step: cached by source hash, rebuilt when stale, clear errors."""

from __future__ import annotations

import subprocess

import pytest

from waitlab.errors import EnvironmentProblem, SimulationError
from waitlab.simulator import build
from waitlab.simulator.build import build_native


def test_missing_compiler_names_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    monkeypatch.setattr(build, "TOOL_FOLDERS", ())  # nor in the usual folders (else: "PATH misses /usr/bin")
    src = tmp_path / "x.cpp"
    src.write_text("int main() { return 0; }\n")
    with pytest.raises(EnvironmentProblem, match=r"smpicxx was not found.*apt-get install -y libsimgrid-dev"):
        build_native(src, "x")


@pytest.mark.simgrid
def test_changed_source_is_rebuilt_and_errors_are_verbatim(tmp_path, monkeypatch):
    monkeypatch.setenv("WAITLAB_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "prog.cpp"
    src.write_text("int main() { return 0; }\n")
    first = build_native(src, "prog")
    assert first.exists() and build_native(src, "prog") == first  # cached
    src.write_text("int main() { return 1; }\n")
    second = build_native(src, "prog")
    assert second != first and second.exists()
    src.write_text("int main() { return undefined_thing; }\n")
    words = r"(?s)smpicxx failed to build .*prog\.cpp:1:21: error: .*undefined_thing"
    with pytest.raises(SimulationError, match=words):
        build_native(src, "prog")
    assert not list((tmp_path / "cache").glob("*.tmp*"))  # no half-built binary left


@pytest.mark.simgrid
def test_a_changed_header_of_the_build_is_rebuilt(tmp_path, monkeypatch):
    """Headers the sources include are named in ``key_files`` (the replay extension's waitlab_replay.hpp): changing
    one gives a new binary, which prints the header's new value."""

    monkeypatch.setenv("WAITLAB_CACHE", str(tmp_path / "cache"))
    src, head = tmp_path / "prog.cpp", tmp_path / "value.hpp"
    src.write_text('#include "value.hpp"\n#include <cstdio>\nint main() { std::printf("%d", VALUE); return 0; }\n')
    head.write_text("#define VALUE 1\n")
    first = build_native(src, "prog", compiler="g++", key_files=(head,))  # g++: runs without smpirun
    head.write_text("#define VALUE 2\n")
    second = build_native(src, "prog", compiler="g++", key_files=(head,))
    assert second != first
    assert [subprocess.run([str(b)], capture_output=True, text=True).stdout for b in (first, second)] == ["1", "2"]
