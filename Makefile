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

.PHONY: install lock reproduce test test-capabilities test-ends test-fast lint bench schema docs clean

install: $(STAMP)

# The exact versions of requirements.lock (pyproject.toml declares ranges).  torch goes first, at
# the lock's version, so pip never pulls another build; then the lock; then the package itself,
# editable and without dependencies.  pip compiles the bytecode (half of the install's time): with
# PYTHONDONTWRITEBYTECODE set, as on our machines, every process would otherwise compile torch
# again on import (the tests 1.7x slower).
LOCK = requirements.lock
PIP = $(BIN)/pip install --quiet --disable-pip-version-check
$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) $$(grep -m1 '^torch==' $(LOCK))
	$(PIP) -r $(LOCK)
	$(PIP) --no-deps -e .
	touch $(STAMP)

# Regenerate requirements.lock after pyproject.toml changes: pip-tools' pip-compile, from a venv of
# its own, keeps every pin of the lock that still satisfies the ranges and resolves the rest;
# `make lock LOCK_ARGS=--upgrade` moves every pin to the newest release in range.
TOOLS = build/tools
$(TOOLS)/bin/uv:
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check pip-tools==7.7.0 uv==0.13.10

lock: $(TOOLS)/bin/uv
	$(TOOLS)/bin/pip-compile --quiet --extra test --extra ray --extra zoo --strip-extras \
		--no-emit-find-links --no-emit-index-url $(LOCK_ARGS) -o $(LOCK) pyproject.toml

reproduce: install
	$(BIN)/kernelgap reproduce --profile $(PROFILE) --out $(OUT)

# lint, then the whole suite (what CI runs)
test: lint
	$(BIN)/python -m pytest -q -m "not install" $(PYTEST_ARGS)

# the floating-point tests (marked `numerics`) again under every other SIMD capability this CPU
# has (ATEN_CPU_CAPABILITY=default, avx2, avx512 but the native one): CI runs it after `make test`
test-capabilities: install
	for cap in $$($(BIN)/python tests/capabilities.py); do \
		echo "ATEN_CPU_CAPABILITY=$$cap: the numerics tests"; \
		ATEN_CPU_CAPABILITY=$$cap $(BIN)/python -m pytest -q -m numerics $(PYTEST_ARGS) || exit 1; \
	done

# The numerics tests at both ends of pyproject.toml's ranges, each in a venv of its own under build/
# (rebuilt when pyproject.toml changes): `lowest` at the lowest release of every direct dependency
# (uv's --resolution lowest-direct, as constraints: torch 2.13.0 from pip's own sources), `newest`
# at the newest release pip finds, torch $(NEWEST_TORCH) first (the newest this machine's pip takes
# without a multi-GB download; CI runs `make test-ends` after `make test`); then the wheel installed
# into a bare venv runs every command, and into a copy of the newest end keeps its torch (the
# `install` tests of tests/test_install.py, which `make test` leaves to this target)
NEWEST_TORCH ?= 2.14.1
ENDS = build/ends
$(ENDS)/lowest/.installed: pyproject.toml $(TOOLS)/bin/uv
	rm -rf $(@D) && $(PYTHON) -m venv $(@D)
	$(TOOLS)/bin/uv pip compile --quiet --resolution lowest-direct --extra test --python-version 3.11 \
		pyproject.toml -o $(@D)/constraints.txt
	$(@D)/bin/pip install --quiet --disable-pip-version-check $$(grep -m1 '^torch==' $(@D)/constraints.txt)
	$(@D)/bin/pip install --quiet --disable-pip-version-check -c $(@D)/constraints.txt -e '.[test]'
	touch $@
$(ENDS)/newest/.installed: pyproject.toml
	rm -rf $(@D) && $(PYTHON) -m venv $(@D)
	$(@D)/bin/pip install --quiet --disable-pip-version-check torch==$(NEWEST_TORCH)
	$(@D)/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

test-ends: install $(ENDS)/lowest/.installed $(ENDS)/newest/.installed
	for end in lowest newest; do \
		$(ENDS)/$$end/bin/python -c "import torch, numpy, pydantic; print('$$end:', 'torch', torch.__version__, \
			'numpy', numpy.__version__, 'pydantic', pydantic.__version__)"; \
		$(ENDS)/$$end/bin/python -m pytest -q -m numerics $(PYTEST_ARGS) || exit 1; \
	done
	KERNELGAP_OTHER_TORCH_VENV=$(ENDS)/newest $(BIN)/python -m pytest -q -m install tests/test_install.py

# the edit loop: the suite less its long tests (marked `slow`: processes, kills, fuzzers, whole
# probes and sweeps) and Ray's, on both cores; `make test` runs them all
test-fast: install
	$(BIN)/python -m pytest -q -m "not slow and not ray and not install" $(PYTEST_ARGS)

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
