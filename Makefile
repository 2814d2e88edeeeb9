# One entry point per job. `make test` and `make run` bootstrap their own virtualenv.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: test lint run data clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

## lint: ruff (lint rules and formatting), mypy, and import-linter's layering contracts (pyproject.toml)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## test: install the test dependencies into .venv, run the linters, then the whole suite
test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## run: serve on 0.0.0.0:$${PORT:-7860} with embedded SQLite under ./data/
run: $(STAMP)
	$(BIN)/python -m service.app

## data: regenerate seed_data/ bit for bit from the generator
data: $(STAMP)
	$(BIN)/python -m service.env write seed_data

clean:
	rm -rf $(VENV) data .pytest_cache
