#!/usr/bin/env bash
# mypy over the installed layout: setup.py maps the top-level folders into one package (package_dir),
# which mypy cannot follow, so we mirror that mapping with symlinks and check the mirror.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=.typecheck
rm -rf "$tree" && mkdir -p "$tree/waitlab"
for f in waitlab/*.py; do ln -s "../../$f" "$tree/waitlab/$(basename "$f")"; done
for d in simulator models platforms experiments; do ln -s "../../$d" "$tree/waitlab/$d"; done
"${VENV:-.venv}/bin/mypy" --config-file pyproject.toml "$tree/waitlab"
# The layer contract (import-linter) over the same mirror: models pure, simulator below experiments, CLI on the API.
(cd "$tree" && PYTHONPATH=. "../${VENV:-.venv}/bin/lint-imports" --config ../pyproject.toml)
