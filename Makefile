# queueops: two commands.
#   make demo   set everything up, start the lab (PostgreSQL + workload) and open the console
#   make test   set everything up and run every test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Node.js queue libraries the tests run for real (pg-boss), pinned by their package-lock.json.
NODE_LIBS := tests/libraries/node
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt scripts/setup-system.sh $(NODE_LIBS)/package-lock.json | cksum | cut -d' ' -f1)
PIP    := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: setup demo test lint soak bench clean help lock

help:
	@echo "make demo   start the lab and the console at http://localhost:8501 (Ctrl-C stops all)"
	@echo "make test   install everything and run the whole test suite"
	@echo "make lint   ruff and the import layering (lint-imports, .importlinter)"
	@echo "make bench  every benchmark in turn, one JSON object each on stdout (about 40 minutes)"
	@echo "make soak   a 20-minute soak: faults, service, exporter, actions (JSON on stdout)"
	@echo "make clean  stop the lab and remove .venv and .queueops"
	@echo "make lock   re-resolve pyproject.toml's ranges and rewrite constraints.txt (then make test)"

$(STAMP):
	bash scripts/setup-system.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -c constraints.txt pip
	$(PIP) -c constraints.txt -e '.[test]'
	cd $(NODE_LIBS) && npm ci --no-audit --no-fund --loglevel=error
	rm -f $(VENV)/.installed-*
	touch $@

setup: $(STAMP)

demo: setup
	$(BIN)/queueops demo

test: setup
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest --durations=25 --junitxml=artifacts/pytest-junit.xml

# ruff, then the layering contracts of .importlinter (docs/architecture.md, "Layers").
lint: setup
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

BENCHMARKS := collect_cycle discover_catalog service_cycle store_write actions_rebuild_stall seeds pipeline ui_render overhead

bench: setup
	@for b in $(BENCHMARKS); do echo "== benchmarks/$$b.py" >&2; $(BIN)/python benchmarks/$$b.py || exit 1; done

soak: setup
	$(BIN)/python benchmarks/soak.py

# Re-pin: resolve pyproject.toml's ranges in a throwaway venv and freeze the result.
lock:
	rm -rf .venv-lock
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	.venv-lock/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	{ sed -n '/^#/p' constraints.txt; .venv-lock/bin/python -m pip freeze --all --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf .venv-lock
	@echo "constraints.txt rewritten; run make test before committing it"

clean:
	-$(BIN)/queueops lab stop
	rm -rf $(VENV) .queueops
