# The two commands a newcomer runs: `make demo` and `make test`.
# Both create .venv with a Python 3.11+ found on PATH and install cronwave into it.

PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
	if command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; \
	then echo $$p; break; fi; done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NEED_PYTHON := test -n "$(PYTHON)" || { echo "cronwave needs Python 3.11 or newer on PATH"; exit 1; }

.PHONY: setup test-tools demo test lint typecheck pytest bench mutate gen config-table clean

setup: $(STAMP)

$(STAMP): pyproject.toml libs/pyproject.toml examples/billing/pyproject.toml
	@$(NEED_PYTHON)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	@# Two distributions: the SDK (libs: cronwave) and the server over it (here:
	@# cronwave-server), installed together so the server's `cronwave` is this one.
	$(BIN)/python -m pip install --quiet -e ./libs -e '.[dev]'
	@# The console's browser tests drive Debian's chromium (playwright cannot download
	@# its own browsers here): installed once, when /usr/bin/chromium is missing.
	@test -x /usr/bin/chromium || { \
		SUDO=$$(test "$$(id -u)" -eq 0 || echo sudo); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }
	@# The PgBouncer tests run Debian's pgbouncer in front of PostgreSQL in transaction
	@# mode: installed once, when it is missing.
	@test -x /usr/sbin/pgbouncer || { \
		SUDO=$$(test "$$(id -u)" -eq 0 || echo sudo); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq pgbouncer; }
	@# The billing demo is a job package of its own, found by workers through its
	@# entry point (group cronwave.jobs), and its settings, gateway identity and rules
	@# through cronwave.extensions, as a user's job package would be.
	$(BIN)/python -m pip install --quiet -e examples/billing
	@# Our modules' bytecode, written once: every service and job process loads it
	@# instead of compiling the sources again (PYTHONDONTWRITEBYTECODE, where set,
	@# would keep Python from caching it itself).
	$(BIN)/python -m compileall -q libs services examples tools > /dev/null
	@touch $(STAMP)

# Whatever the demo's outcome, it ends saying how to reach the `cronwave` it installed.
demo: setup
	@$(BIN)/cronwave demo; status=$$?; \
	echo; \
	echo "cronwave is installed in $(VENV)/bin: run \`. $(VENV)/bin/activate\` to put it on your PATH,"; \
	echo "then \`cronwave up\`, \`cronwave status\` and the other commands work from any folder."; \
	exit $$status

# What only the tests need is installed beside the set-up, each mostly on one core:
# checkov's venv for the manifests' tests (tests/deploy/checkov_venv.py, about a minute
# the first time on a machine), so that the tests, bound by CPU, never wait for it.
test:
	@$(MAKE) --no-print-directory -j2 --output-sync=target setup test-tools
	@$(MAKE) --no-print-directory lint typecheck pytest

test-tools:
	@$(NEED_PYTHON)
	$(PYTHON) tests/deploy/checkov_venv.py

lint: setup
	$(BIN)/ruff check libs services examples tools tests
	$(BIN)/ruff format --check libs services examples tools tests

typecheck: setup
	$(BIN)/mypy libs services examples tools

# Most tests wait on real processes, so six run at once on two cores; the timing-truth
# tests then run alone. With eight the cores were 99-100% busy all through and the
# parallel part took 817-879 s (six runs), with six 772 and 751 s (docs/benchmarks.md).
# (pytest exits 5 when a selection is empty.) First the test modules are
# rewritten once (pytest's asserts) into __pycache__, which each of those seven processes
# then loads: with PYTHONDONTWRITEBYTECODE set, each rewrote every module (about 5 s of CPU).
pytest: setup
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest --collect-only -q -p no:cacheprovider > /dev/null || true
	$(BIN)/python -m pytest -n 6 --dist worksteal -m "not serial" $(PYTEST_ARGS)
	$(BIN)/python -m pytest -m serial $(PYTEST_ARGS) || [ $$? -eq 5 ]

bench: setup
	$(BIN)/cronwave bench

# Break each guarantee in turn and check that its own test catches it (minutes; by
# hand, not part of `make test`).
mutate: setup
	$(BIN)/python tools/mutate.py

# cronwave's protos (protos/) and the billing example's (examples/billing/protos/).
gen: setup
	$(BIN)/python tools/gen_protos.py

# The configuration table of docs/operations/configure.md, from cronwave_core.settings.
config-table: setup
	$(BIN)/python tools/config_table.py

clean:
	rm -rf $(VENV) .cronwave .pytest_cache .mypy_cache .ruff_cache .ci-artifacts
