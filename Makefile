PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench venv history clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

demo: $(STAMP)
	$(BIN)/python -m drover.demo

bench: $(STAMP)
	$(BIN)/python benchmarks/prompt_bench.py

history: $(STAMP)
	$(BIN)/python -m drover.templates.history --record

clean:
	rm -rf $(VENV) build dist *.egg-info
