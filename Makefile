PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench venv history clean docs lint test-stress

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest
	$(MAKE) lint

# The generated reference docs (docs/reference/*.md): `make docs` rewrites them from the code.
DOCS_GENERATED := $(wildcard docs/reference/*.md)
COG := $(BIN)/cog -I tools

docs: $(STAMP)
	$(COG) -r $(DOCS_GENERATED)

# Every gate `make test` runs after pytest: docs up to date, ruff, mypy.
lint: $(STAMP)
	$(COG) --check $(DOCS_GENERATED)
	$(BIN)/ruff check drover tests tools benchmarks
	$(BIN)/mypy

# SIGKILLs at random points of every writing command, and 16 concurrent writers (tests/stress/).
test-stress: $(STAMP)
	DROVER_STRESS=1 $(BIN)/python -m pytest tests/stress -q -s -p no:cacheprovider

demo: $(STAMP)
	$(BIN)/python -m drover.demo

bench: $(STAMP)
	$(BIN)/python benchmarks/goals_bench.py
	$(BIN)/python benchmarks/prompt_bench.py

history: $(STAMP)
	$(BIN)/python -m drover.templates --record-history

clean:
	rm -rf $(VENV) build dist *.egg-info
