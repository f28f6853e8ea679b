PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench venv history clean e2e

venv: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

# The real agent CLIs, pinned, installed once into a cache outside the repository (docs/agents.md).
CLAUDE_CODE_VERSION ?= 2.1.197
CODEX_VERSION ?= 0.171.0
E2E_CACHE ?= $(HOME)/.cache/drover-e2e
E2E_CLAUDE := $(E2E_CACHE)/claude-$(CLAUDE_CODE_VERSION)/node_modules/.bin/claude
E2E_CODEX := $(E2E_CACHE)/codex-$(CODEX_VERSION)/node_modules/.bin/codex

e2e: $(STAMP)
	@test -x $(E2E_CLAUDE) || npm install --prefix $(E2E_CACHE)/claude-$(CLAUDE_CODE_VERSION) \
		--no-audit --no-fund --loglevel=error @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION)
	@test -x $(E2E_CODEX) || npm install --prefix $(E2E_CACHE)/codex-$(CODEX_VERSION) \
		--no-audit --no-fund --loglevel=error @openai/codex@$(CODEX_VERSION)
	E2E_REQUIRED=1 E2E_CLAUDE_BIN=$(E2E_CLAUDE) E2E_CODEX_BIN=$(E2E_CODEX) \
		PATH="$(dir $(E2E_CLAUDE)):$(dir $(E2E_CODEX)):$$PATH" \
		$(BIN)/python -m pytest tests/e2e "tests/test_agents.py::test_preset_flags_appear_in_the_real_clis_help"

demo: $(STAMP)
	$(BIN)/python -m drover.demo

bench: $(STAMP)
	$(BIN)/python benchmarks/prompt_bench.py

history: $(STAMP)
	$(BIN)/python -m drover.templates --record-history

clean:
	rm -rf $(VENV) build dist *.egg-info
