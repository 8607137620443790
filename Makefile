# kernelgap: `make reproduce` runs the main job, `make test` the test suite.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
PROFILE ?= quick
OUT    ?= results/reproduce-$(PROFILE)

.PHONY: install reproduce test test-fast bench schema clean

install: $(STAMP)

# torch is installed first and pinned, so pip never pulls another build.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,ray,zoo]'
	touch $(STAMP)

reproduce: install
	$(BIN)/kernelgap reproduce --profile $(PROFILE) --out $(OUT)

test: install
	$(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow and not ray"

bench: install
	$(BIN)/python benchmarks/bench_trainer.py

# the JSON schema of sweep files, from the config models (tests/test_sweep_schema.py checks it)
schema: install
	$(BIN)/python -c "from kernelgap.sweeps.config import write_sweep_schema; print(write_sweep_schema())"

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis
