PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo bench venv history clean docs lint e2e test-stress test-browser bytecode

venv: $(STAMP)

# drover's own modules compiled once, before the tests or benchmarks start hundreds of drover
# processes: the install is editable, so nothing else compiles them, and where
# PYTHONDONTWRITEBYTECODE is set (CI images often set it) every one of those processes would
# compile all it imports again. That variable stops Python writing bytecode, not reading it
# (a fresh clone here: 170 -> 156 s of pytest).
# The environment's packages are compiled here too, on every core, not by pip one file after
# another (`--no-compile` below): a fresh clone's install 22 -> 14 s, the compile 3 s.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q -j 0 drover $(VENV)/lib >/dev/null

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --no-compile -e '.[test]'
	touch $(STAMP)

# The suite runs on TEST_JOBS processes (pytest-xdist): every test has its own repository, HOME
# and environment (tests/conftest.py), so they share nothing. Four on CI's two cores: most tests
# wait on git and agent processes, and the third and fourth keep the cores busy (two: 170 s,
# three: 153-179 s, four: 155-159 s, five: 162 s; docs/performance.md).
# The longest tests come first (tests/conftest.py) and go out one at a time (--maxschedchunk 1),
# so no process is left running a queue of them while the other has finished.
TEST_JOBS ?= 4

# pytest keeps each test module's assertion-rewritten bytecode beside it, unless
# PYTHONDONTWRITEBYTECODE is set: then each test process rewrites all 60 modules again (3.4 s of
# CPU a process). Set empty here, for pytest alone.
#
# The tests' files (a git repository, HOME and ledger for each test, worktrees, wheels) go to a
# folder of their own in the RAM filesystem TEST_RAM when it is there with 1 GiB free (the suite
# holds about 60 MB at its peak), else in the system's temporary folder. Thousands of small
# repositories made and removed cost a journalled disk half a minute or more of system time
# (a run: pytest 180-233 s with its files on this machine's ext4, 149-172 s on /dev/shm;
# docs/performance.md). The folder goes when the run passes; a failed run's is kept, with the
# failed tests' folders in it (tmp_path_retention_policy), and named. `make test-stress` and
# `make e2e` keep their files on the disk, so the suite still meets a real one.
TEST_RAM ?= /dev/shm
test: bytecode
	@ram=$$(test -d $(TEST_RAM) -a -w $(TEST_RAM) && df -Pk $(TEST_RAM) | awk 'NR == 2 && $$4 >= 1048576 {print "$(TEST_RAM)"}'); \
	tmp=$$(mktemp -d -p "$${ram:-$${TMPDIR:-/tmp}}" drover-tests.XXXXXX) || exit 1; \
	echo "PYTHONDONTWRITEBYTECODE= TMPDIR=$$tmp $(BIN)/python -m pytest -n $(TEST_JOBS) --maxschedchunk 1"; \
	if PYTHONDONTWRITEBYTECODE= TMPDIR="$$tmp" $(BIN)/python -m pytest -n $(TEST_JOBS) --maxschedchunk 1; then \
	  rm -rf "$$tmp"; \
	else \
	  status=$$?; echo "drover: the failed tests' files are kept in $$tmp"; exit $$status; \
	fi
	$(MAKE) lint

# The generated reference docs (docs/reference/*.md, and the cog blocks of configuration.md,
# agents.md and fields.md): `make docs` rewrites them from the code.
DOCS_GENERATED := $(wildcard docs/reference/*.md) docs/configuration.md docs/agents.md docs/fields.md docs/report.md
COG := $(BIN)/cog -I tools

docs: $(STAMP)
	$(COG) -r $(DOCS_GENERATED)

# Every gate `make test` runs after pytest: docs up to date, ruff, mypy.
lint: $(STAMP)
	$(COG) --check $(DOCS_GENERATED)
	$(BIN)/ruff check drover tests tools benchmarks
	$(BIN)/mypy

# The real agent CLIs, pinned, installed once into a cache outside the repository (docs/agents.md).
# claude and codex run the whole loop; gemini and opencode get their --help checked.
CLAUDE_CODE_VERSION ?= 2.1.197
CODEX_VERSION ?= 0.171.0
GEMINI_VERSION ?= 0.61.0
OPENCODE_VERSION ?= 1.18.33
E2E_CACHE ?= $(HOME)/.cache/drover-e2e
E2E_CLAUDE := $(E2E_CACHE)/claude-$(CLAUDE_CODE_VERSION)/node_modules/.bin/claude
E2E_CODEX := $(E2E_CACHE)/codex-$(CODEX_VERSION)/node_modules/.bin/codex
E2E_GEMINI := $(E2E_CACHE)/gemini-$(GEMINI_VERSION)/node_modules/.bin/gemini
E2E_OPENCODE := $(E2E_CACHE)/opencode-$(OPENCODE_VERSION)/node_modules/.bin/opencode
# $(call npm_pin,program,folder,package@version): install unless the program is there already
npm_pin = test -x $(1) || npm install --prefix $(2) --no-audit --no-fund --loglevel=error $(3)

e2e: bytecode
	@$(call npm_pin,$(E2E_CLAUDE),$(E2E_CACHE)/claude-$(CLAUDE_CODE_VERSION),@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION))
	@$(call npm_pin,$(E2E_CODEX),$(E2E_CACHE)/codex-$(CODEX_VERSION),@openai/codex@$(CODEX_VERSION))
	@$(call npm_pin,$(E2E_GEMINI),$(E2E_CACHE)/gemini-$(GEMINI_VERSION),@google/gemini-cli@$(GEMINI_VERSION))
	@$(call npm_pin,$(E2E_OPENCODE),$(E2E_CACHE)/opencode-$(OPENCODE_VERSION),opencode-ai@$(OPENCODE_VERSION))
	E2E_REQUIRED=1 E2E_CLAUDE_BIN=$(E2E_CLAUDE) E2E_CODEX_BIN=$(E2E_CODEX) \
		PATH="$(dir $(E2E_CLAUDE)):$(dir $(E2E_CODEX)):$(dir $(E2E_GEMINI)):$(dir $(E2E_OPENCODE)):$$PATH" \
		$(BIN)/python -m pytest tests/e2e "tests/test_agents.py::test_preset_flags_appear_in_the_real_clis_help"

# SIGKILLs at random points of every writing command, and 16 concurrent writers (tests/stress/).
test-stress: bytecode
	DROVER_STRESS=1 $(BIN)/python -m pytest tests/stress -q -s -p no:cacheprovider

# The report's HTML page in a real browser: Chromium from the system's packages (installed when
# missing), driven by Playwright for Python (the `browser` extra; no browser download of its own).
CHROMIUM ?= /usr/bin/chromium

test-browser: bytecode
	test -x $(CHROMIUM) || (apt-get update -q && apt-get install -y -q chromium)
	$(BIN)/python -m pip install --quiet -e '.[test,browser]'
	DROVER_BROWSER_REQUIRED=1 DROVER_CHROMIUM=$(CHROMIUM) $(BIN)/python -m pytest tests/browser -v -rs -p no:cacheprovider

demo: $(STAMP)
	$(BIN)/python -m drover.cli.demo

bench: bytecode
	$(BIN)/python benchmarks/goals_bench.py
	$(BIN)/python benchmarks/prompt_bench.py
	$(BIN)/python benchmarks/drive_bench.py
	$(BIN)/python benchmarks/budget_bench.py
	$(BIN)/python benchmarks/pool_bench.py

history: $(STAMP)
	$(BIN)/python -m drover.prompts.history --record

clean:
	rm -rf $(VENV) build dist *.egg-info

# The ray executor against a real local Ray cluster (tests/cluster), in a network namespace of
# its own so no traffic leaves loopback. Ray is pinned; where it cannot install, or no namespace
# can be made, the tests run without it and skip, saying why.
CLUSTER_VENV ?= .venv-cluster
RAY_VERSION ?= 2.60.0

.PHONY: test-cluster
test-cluster:
	test -x $(CLUSTER_VENV)/bin/python || $(PYTHON) -m venv $(CLUSTER_VENV)
	$(CLUSTER_VENV)/bin/python -m pip install --quiet -e '.[test]'
	$(CLUSTER_VENV)/bin/python -m pip install --quiet 'ray==$(RAY_VERSION)' || echo "drover: Ray $(RAY_VERSION) did not install; the cluster tests will skip"
	$(CLUSTER_VENV)/bin/python -m compileall -q drover
	if unshare -n true 2>/dev/null; then \
	  unshare -n sh -c 'ip link set lo up && DROVER_TEST_CLUSTER=1 RAY_USAGE_STATS_ENABLED=0 $(CLUSTER_VENV)/bin/python -m pytest tests/cluster -v -rs -p no:cacheprovider'; \
	else \
	  DROVER_TEST_CLUSTER=1 DROVER_CLUSTER_SKIP="no network namespace of its own (unshare -n needs root)" $(CLUSTER_VENV)/bin/python -m pytest tests/cluster -v -rs; \
	fi

# The newer Pythons pyproject.toml claims (3.12, 3.13), each in a virtual environment of its own,
# on the tests that touch what differs between versions (dataclasses, sqlite3's parameters,
# the parse pool's spawned workers, PyYAML through python-frontmatter); found on PATH or under pyenv, and skipped with a line saying so when
# not installed.
PYTHON_VERSIONS ?= 3.12 3.13
VERSION_TESTS := tests/test_items.py tests/test_new_item.py tests/test_templates.py \
	tests/test_commands.py tests/test_list_paths.py tests/test_parallel_parse.py tests/test_ledger.py

.PHONY: test-pythons
test-pythons:
	@for version in $(PYTHON_VERSIONS); do \
	  python=python$$version; \
	  $$python -c pass 2>/dev/null || python=$$(ls -d "$$(pyenv root 2>/dev/null)"/versions/$$version.*/bin/python$$version 2>/dev/null | tail -n 1); \
	  if [ -z "$$python" ] || ! $$python -c pass 2>/dev/null; then \
	    echo "drover: python$$version is not installed; skipped"; continue; fi; \
	  venv=.venv-$$version; \
	  test -x $$venv/bin/python || $$python -m venv $$venv || exit 1; \
	  $$venv/bin/python -m pip install --quiet -e '.[test]' || exit 1; \
	  $$venv/bin/python -m compileall -q drover || exit 1; \
	  echo "drover: the version tests on python$$version"; \
	  $$venv/bin/python -m pytest -p no:cacheprovider -W error::DeprecationWarning $(VERSION_TESTS) || exit 1; \
	done
