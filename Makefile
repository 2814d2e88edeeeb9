# One entry point per job. `make test` and `make run` bootstrap their own virtualenv.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: test run data clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

## test: install the test dependencies into .venv and run the whole suite
test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## run: serve on 0.0.0.0:$${PORT:-7860} with embedded SQLite under ./data/
run: $(STAMP)
	$(BIN)/python -m service.app

## data: regenerate seed_data/ bit for bit from the generator
data: $(STAMP)
	$(BIN)/python -m service.env write seed_data

clean:
	rm -rf $(VENV) data .pytest_cache
