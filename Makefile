PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench venv history clean docs lint

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

demo: $(STAMP)
	$(BIN)/python -m drover.demo

bench: $(STAMP)
	$(BIN)/python benchmarks/prompt_bench.py

history: $(STAMP)
	$(BIN)/python -m drover.templates --record-history

clean:
	rm -rf $(VENV) build dist *.egg-info
