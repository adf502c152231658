#!/usr/bin/env bash
# Installs everything waitlab needs on a fresh Debian bookworm machine:
# SimGrid (Debian packages), a venv made from the system Python (for the
# python3-simgrid bindings), waitlab in editable mode, and the native replay
# extension.  Idempotent: a second run only checks.
# g++ is needed by smpicxx (the replay extension) and is not a dependency of libsimgrid-dev; make runs the Makefile.
# chromium: the browser test of report.html (headless, tests/headless.py).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

. scripts/apt_need.sh
apt_need bootstrap libsimgrid-dev python3-simgrid python3-venv python3-dev g++ gfortran make python3-otf2 otf2-tools libjs-mathjax chromium

if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating $VENV from /usr/bin/python3 (system site packages, for python3-simgrid)"
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi
stamp="$VENV/.waitlab-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ]; then
  echo "bootstrap: installing waitlab and its Python dependencies into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # setuptools' notice that an editable install maps folders by name: expected here, not worth 10 lines
  PYTHONWARNINGS="ignore:Editable installation" "$VENV/bin/python" -m pip install -q -e ".[dev]"
  touch "$stamp"
fi
# waitlab's bytecode, as pip writes it for a regular install: an editable install leaves it to the first import, and
# where PYTHONDONTWRITEBYTECODE is set (CI images, sandboxes) every command would compile its ~100 modules again
# (0.07 s of a small run's 0.7 s, measured).  Quick when up to date.
"$VENV/bin/python" -m compileall -q -j 0 waitlab experiments models platforms simulator >/dev/null
# Build (or verify) the native parts (replay extension, contention plugin, text library); rebuilt when their sources change.
"$VENV/bin/python" -c "import sys; from waitlab.simulator.build import main; sys.exit(main())"  # -m would warn: the package imports build
