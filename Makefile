# One entry point per job. `make run` and `make test` bootstrap their own virtualenv (.venv):
# `make run` installs only what serving needs, exactly as locked (requirements.txt, exported from
# uv.lock: the Docker image's set); `make test` adds the test and lint tools.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
# the test extra's pin and the Dockerfile's (tests/system/test_docs_snippets.py checks they agree)
UV      = uv==0.13.9
SERVE   = $(VENV)/.installed-serve
STAMP   = $(VENV)/.installed

.PHONY: test lint run data requirements clean

## the serving set: the locked versions with their hashes, then this project in place (no build isolation:
## the locked setuptools is in the set, so nothing else is fetched). uv installs them (in parallel: pip
## took minutes for the same set). Everything is compiled to bytecode here, once: Python only reads it
## where PYTHONDONTWRITEBYTECODE is set, and a start that compiles the app costs ~3x the CPU (3.3 s
## instead of 1.2 s on 2 vCPU), which decides how fast a worker serves on a busy machine.
$(SERVE): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check "$(UV)"
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps --require-hashes --compile-bytecode -r requirements.txt
	$(BIN)/uv pip install --quiet --python $(BIN)/python --no-deps --no-build-isolation -e .
	$(BIN)/python -m compileall -q -j 0 service server migrations
	touch $(SERVE)

## the test extra (pytest, openenv, playwright, schemathesis, ruff, mypy, ...) on top
$(STAMP): pyproject.toml $(SERVE)
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[test]'
	touch $(STAMP)

## lint: ruff (lint rules and formatting), mypy, and import-linter's layering contracts (pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## test: install the test dependencies into .venv, run the linters, then the whole suite on every core
## (pytest-xdist: PYTEST_WORKERS processes, each taking whole test modules; PYTEST_WORKERS=0 runs it in
## this process). One worker more than the CPUs: the system tests' servers, clients and browser wait on
## I/O, and a third worker fills those gaps on 2 vCPUs (quiet: 445 s with 2 workers, 402 s with 3, 442 s
## with 4 — past one extra, the workers only contend).
## The suite starts hundreds of Python processes (servers, clients, tools): their compiled bytecode is kept
## under .venv/pycache (not beside the sources), even where PYTHONDONTWRITEBYTECODE is set, so each module is
## compiled once instead of in every process (about 1 s of CPU per server start).
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test: lint
	PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX="$(abspath $(VENV))/pycache" \
		$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

## run: serve on 0.0.0.0:$${PORT:-7860} with embedded SQLite under ./data/
run: $(SERVE)
	$(BIN)/python -m service.app

## data: regenerate seed_data/ bit for bit from the generator
data: $(SERVE)
	$(BIN)/python -m service.env write seed_data

## requirements: re-export requirements.txt from uv.lock (after `uv lock`; a test checks they agree)
requirements: $(STAMP)
	$(BIN)/uv export --frozen --no-dev --group build --no-emit-project --prune openenv --output-file requirements.txt

clean:
	rm -rf $(VENV) data .pytest_cache
