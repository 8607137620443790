# kernelgap: `make reproduce` runs the main job, `make test` the test suite.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
PROFILE ?= quick
OUT    ?= results/reproduce-$(PROFILE)
# pytest options of `make test`: both cores (pytest-xdist), each test file on one worker, so a
# module's costly fixture (a reference sweep, a Ray head) is built once (`loadgroup` does not group
# with pytest 9.2 and xdist 3.8: the marked tests were spread over both workers), in the order
# tests/conftest.py sorts them (longest modules first; xdist's own reordering puts the modules with
# the most tests first, leaving a long one-test module to run alone at the end); PYTEST_ARGS=
# runs serially
PYTEST_ARGS ?= -n 2 --dist loadfile --no-loadscope-reorder

.PHONY: install reproduce test test-capabilities test-fast lint bench schema docs clean

install: $(STAMP)

# torch is installed first and pinned, so pip never pulls another build.  pip compiles the
# bytecode (half of the install's time): with PYTHONDONTWRITEBYTECODE set, as on our machines,
# every process would otherwise compile torch again on import (the tests 1.7x slower).
PIP = $(BIN)/pip install --quiet --disable-pip-version-check
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) torch==2.13.0
	$(PIP) -e '.[test,ray,zoo]'
	touch $(STAMP)

reproduce: install
	$(BIN)/kernelgap reproduce --profile $(PROFILE) --out $(OUT)

# lint, then the whole suite (what CI runs)
test: lint
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# the floating-point tests (marked `numerics`) again under every other SIMD capability this CPU
# has (ATEN_CPU_CAPABILITY=default, avx2, avx512 but the native one): CI runs it after `make test`
test-capabilities: install
	for cap in $$($(BIN)/python tests/capabilities.py); do \
		echo "ATEN_CPU_CAPABILITY=$$cap: the numerics tests"; \
		ATEN_CPU_CAPABILITY=$$cap $(BIN)/python -m pytest -q -m numerics $(PYTEST_ARGS) || exit 1; \
	done

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow and not ray"

lint: install
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/ruff format --check src tests benchmarks tools
	$(BIN)/deptry src

bench: install
	$(BIN)/python benchmarks/bench_trainer.py

# the JSON schema of sweep files, from the config models (tests/test_sweep_schema.py checks it)
schema: install
	$(BIN)/python -c "from kernelgap.sweeps.schema import write_sweep_schema; print(write_sweep_schema())"

# the docs' tables of the registries (experiments, conclusions, feature maps), rewritten from
# them between their markers (tests/test_doc_tables.py fails while one is stale)
docs: install
	$(BIN)/python tools/doc_tables.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .hypothesis
