VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= results/demo

.PHONY: setup demo test lint docs bench clean

setup:
	@bash scripts/bootstrap.sh

demo: setup
	$(VENV)/bin/waitlab run examples/lared_s_dawning.toml -o $(OUT) --force

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy waitlab simulator models platforms experiments

docs: setup
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html

test: setup lint docs
	$(VENV)/bin/python -m pytest -q tests

bench: setup
	$(PY) benchmarks/run_all.py

clean:
	rm -rf docs/_build build *.egg-info results
