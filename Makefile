VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= results/demo

.PHONY: setup demo test lint docs bench clean scalasca

setup:
	@bash scripts/bootstrap.sh

demo: setup
	$(VENV)/bin/waitlab run examples/lared_s_dawning.toml -o $(OUT) --force

lint: setup
	$(VENV)/bin/ruff check .
	VENV=$(VENV) bash scripts/typecheck.sh

docs: setup
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html

# Scalasca 2.6 for the cross-check tests (tests/test_scalasca.py): built once into the cache from
# ../shared/tools/scalasca-2.6.tar.gz; skipped with a message when that file is absent. Not needed by demo.
scalasca:
	@bash scripts/build_scalasca.sh

test: setup lint docs scalasca
	$(VENV)/bin/python -m pytest -q

bench: setup
	$(PY) benchmarks/bench_core.py

clean:
	rm -rf docs/_build build *.egg-info results
