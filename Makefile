# queueops: two commands.
#   make demo   set everything up, start the lab (PostgreSQL + workload) and open the console
#   make test   set everything up and run every test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml scripts/setup-system.sh | cksum | cut -d' ' -f1)

.PHONY: setup demo test lint soak bench clean help

help:
	@echo "make demo   start the lab and the console at http://localhost:8501 (Ctrl-C stops all)"
	@echo "make test   install everything and run the whole test suite"
	@echo "make lint   ruff"
	@echo "make bench  every benchmark in turn, one JSON object each on stdout (about 40 minutes)"
	@echo "make soak   a 20-minute soak: faults, service, exporter, actions (JSON on stdout)"
	@echo "make clean  stop the lab and remove .venv and .queueops"

$(STAMP):
	bash scripts/setup-system.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

setup: $(STAMP)

demo: setup
	$(BIN)/queueops demo

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .

BENCHMARKS := collect_cycle store_write actions_rebuild_stall seeds pipeline ui_render overhead

bench: setup
	@for b in $(BENCHMARKS); do echo "== benchmarks/$$b.py" >&2; $(BIN)/python benchmarks/$$b.py || exit 1; done

soak: setup
	$(BIN)/python benchmarks/soak.py

clean:
	-$(BIN)/queueops lab stop
	rm -rf $(VENV) .queueops
