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
	VENV=$(VENV) bash scripts/typecheck.sh

docs: setup
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html

test: setup lint docs
	$(VENV)/bin/python -m pytest -q

bench: setup
	$(PY) benchmarks/bench_core.py

clean:
	rm -rf docs/_build build *.egg-info results
