"""Build the native replay extension with ``smpicxx``, cached by source hash.

The binary lives in ``$WAITLAB_CACHE`` (default ``~/.cache/waitlab``) under a
name that includes the hash of the C++ source and of the ``smpicxx`` version,
so a changed source or SimGrid is rebuilt automatically and a stale binary is
never used.  ``python -m waitlab.simulator.build`` builds it from the set-up step.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from waitlab.errors import EnvironmentProblem, SimulationError
from waitlab.models.vocabulary import c_header

NATIVE_DIR = Path(__file__).resolve().parent / "native"
REPLAY_SOURCE = NATIVE_DIR / "waitlab_replay.cpp"
TEXT_SOURCE = NATIVE_DIR / "waitlab_text.cpp"
#: The replay extension's other parts, linked with it (sub-communicator collectives, one-sided communication) and the
#: header they share (part of the build's cache key).
REPLAY_PARTS = (NATIVE_DIR / "waitlab_replay_subcomm.cpp", NATIVE_DIR / "waitlab_replay_rma.cpp")
REPLAY_HEADER = NATIVE_DIR / "waitlab_replay.hpp"
#: The contention plugin (NONLINEAR link sharing from the ``WAITLAB_CONTENTION`` rules), built as a shared object
#: (:func:`contention_plugin`) that every SMPI run with rules loads (``LD_PRELOAD``, :func:`waitlab.simulator.smpi.
#: plugin_wrapper`): replays, real programs and a program's stock re-run alike; :mod:`waitlab.platforms.contention`
#: writes the rules.
CONTENTION_SOURCE = NATIVE_DIR / "waitlab_contention.cpp"
#: Compiler flags of the contention plugin's shared object.
PLUGIN_FLAGS = ("-O2", "-std=c++17", "-shared", "-fPIC")
#: Nonblocking collectives of the replay (posts and their completions), linked into the replay program.
NBC_SOURCE = NATIVE_DIR / "waitlab_replay_nbc.cpp"
#: The progress file of a long replay (simulated time reached, actions replayed): :mod:`waitlab.simulator.progress`.
PROGRESS_SOURCE = NATIVE_DIR / "waitlab_progress.cpp"
#: Action codes and names for the native parts, generated from :mod:`waitlab.models.vocabulary`.
ACTIONS_HEADER = NATIVE_DIR / "waitlab_actions.h"
INSTALL_HINT = "sudo apt-get install -y libsimgrid-dev python3-simgrid   (or run: make setup)"


def cache_dir() -> Path:
    """waitlab's one cache: ``$WAITLAB_CACHE``, else ``$XDG_CACHE_HOME/waitlab``, else ``~/.cache/waitlab``; always
    an absolute path (a relative ``WAITLAB_CACHE`` is taken from the current folder: SimGrid runs in another one).

    It holds built native parts, compiled programs and ``counterfactuals/`` (diagnosis re-runs).  A user without a
    home folder (no ``HOME`` and no entry in the password database, e.g. ``docker run -u 12345``) and without
    ``WAITLAB_CACHE`` gets one :class:`EnvironmentProblem` saying to set it.
    """
    root = os.environ.get("WAITLAB_CACHE")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        if xdg and os.path.isabs(xdg):  # the XDG rule: a relative value is ignored
            root = os.path.join(xdg, "waitlab")
        else:
            home = os.path.expanduser("~")
            if home.startswith("~"):  # neither HOME nor a password entry: expanduser leaves "~" as it is
                raise EnvironmentProblem("cannot determine a cache folder: there is no home folder (HOME is unset and "
                                         f"user id {os.getuid()} has no entry in the password database) (fix: set "
                                         "WAITLAB_CACHE to a folder you can write, e.g. export "
                                         "WAITLAB_CACHE=/tmp/waitlab-cache)")
            root = os.path.join(home, ".cache", "waitlab")
    return Path(os.path.abspath(root))


#: Where Debian's SimGrid puts its tools: a tool found there but not on ``PATH`` is said to be off ``PATH``.
TOOL_FOLDERS = ("/usr/bin", "/usr/local/bin")


def require_tool(name: str) -> str:
    """Absolute path of a SimGrid tool, or an :class:`EnvironmentProblem` with the install command (or, when the
    tool is installed in :data:`TOOL_FOLDERS` but ``PATH`` misses that folder, with that folder)."""
    path = shutil.which(name)
    if path is None:
        for folder in TOOL_FOLDERS:
            found = shutil.which(name, path=folder)
            if found is not None:
                raise EnvironmentProblem(f"{name} was not found on PATH, but it is installed as {found}: PATH "
                                         f"misses {folder} (fix: export PATH=\"$PATH:{folder}\")")
        raise EnvironmentProblem(f"{name} was not found on PATH; SimGrid SMPI is not installed. Install it with: "
                                 f"{INSTALL_HINT}")
    return path


@lru_cache(maxsize=1)
def simgrid_version() -> str:
    """SimGrid version as reported by ``smpirun -version`` (e.g. ``3.32``)."""
    smpirun = require_tool("smpirun")
    out = subprocess.run([smpirun, "-version"], capture_output=True, text=True, timeout=60)
    text = (out.stdout + out.stderr).strip()
    for token in text.replace("v", " ").split():
        if token[:1].isdigit() and "." in token:
            return token.strip(".,")
    return text.splitlines()[0] if text else "unknown"


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
    return h.hexdigest()[:16]


def checked_actions_header() -> str:
    """Text of ``native/waitlab_actions.h``, checked to equal what the action vocabulary generates.

    The header is checked in (so the native sources build on their own); a stale one would give the
    native parts other action codes than Python's, so it is refused before anything is compiled.
    """
    expected = c_header()
    found = ACTIONS_HEADER.read_text() if ACTIONS_HEADER.exists() else ""
    if found != expected:
        raise SimulationError(f"{ACTIONS_HEADER} does not match waitlab.models.vocabulary; regenerate it with: "
                              f"python -m waitlab.models.vocabulary > {ACTIONS_HEADER}")
    return expected


def build_native(source: Path, output_name: str, compiler: str = "smpicxx",
                 flags: tuple[str, ...] = ("-O2", "-std=c++17"), extra_sources: tuple[Path, ...] = (),
                 key_files: tuple[Path, ...] = ()) -> Path:
    """Compile one native source (and ``extra_sources`` linked with it) with a SimGrid compiler wrapper,
    reusing a cached build.  ``key_files`` (headers the sources include) are part of the cache key too.

    Raises :class:`SimulationError` with the compiler's own words when it fails.
    """
    cc = require_tool(compiler)
    key = _digest(source.read_bytes(), *(x.read_bytes() for x in (*extra_sources, *key_files)),
                  checked_actions_header().encode(),
                  simgrid_version().encode(), " ".join(flags).encode())
    target = cache_dir() / f"{output_name}-{key}"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if not os.access(target.parent, os.W_OK | os.X_OK):  # else the linker's own words: "cannot open output file"
        raise EnvironmentProblem(f"{target.parent}: (cache folder): you may not write there, so {compiler} cannot "
                                 f"build {source.name} into it (fix: set WAITLAB_CACHE to a folder you can write)")
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    proc = subprocess.run([cc, *flags, "-o", str(tmp), str(source), *map(str, extra_sources)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise SimulationError(f"{compiler} failed to build {source}:\n{proc.stdout}{proc.stderr}".rstrip())
    os.replace(tmp, target)  # atomic: concurrent builders never see a half-written binary
    return target


def replay_binary() -> Path:
    """Path of the (built, up-to-date) waitlab replay program."""
    return build_native(REPLAY_SOURCE, "waitlab-replay",
                        extra_sources=(NBC_SOURCE, PROGRESS_SOURCE, *REPLAY_PARTS), key_files=(REPLAY_HEADER,))


def contention_plugin() -> Path:
    """Path of the (built, up-to-date) contention plugin, a shared object loaded into SMPI with ``LD_PRELOAD``."""
    return build_native(CONTENTION_SOURCE, "waitlab-contention", flags=PLUGIN_FLAGS)


def text_library_file() -> Path:
    """The shared object of ``native/waitlab_text.cpp`` (:mod:`waitlab.simulator.native_text`), built when its
    source changed."""
    return build_native(TEXT_SOURCE, "waitlab-text.so", compiler="c++", flags=("-O2", "-std=c++17", "-shared", "-fPIC"))


def main() -> int:
    try:
        path = replay_binary()
        plugin = contention_plugin()
        text = text_library_file()
    except (EnvironmentProblem, SimulationError) as exc:
        print(f"waitlab: {exc}", file=sys.stderr)
        return 1
    print(f"waitlab: replay extension ready: {path}")
    print(f"waitlab: contention plugin ready: {plugin}")
    print(f"waitlab: text library ready: {text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
