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
	$(BIN)/python -m drover.templates.history --record

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
	if unshare -n true 2>/dev/null; then \
	  unshare -n sh -c 'ip link set lo up && DROVER_TEST_CLUSTER=1 RAY_USAGE_STATS_ENABLED=0 $(CLUSTER_VENV)/bin/python -m pytest tests/cluster -v -rs -p no:cacheprovider'; \
	else \
	  DROVER_TEST_CLUSTER=1 DROVER_CLUSTER_SKIP="no network namespace of its own (unshare -n needs root)" $(CLUSTER_VENV)/bin/python -m pytest tests/cluster -v -rs; \
	fi
