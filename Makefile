# Two commands do everything on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO_SPEC ?= pipelines/topology_classifier.yaml
PYTEST_ARGS ?=
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: bootstrap demo test lint format clean browser

# The venv is (re)installed when requirements.txt or pyproject.toml change; uv when present, else pip.
# Bytecode is compiled at install time: with PYTHONDONTWRITEBYTECODE set (as on CI images) nothing
# is ever cached, and every task, spark-submit driver and Python worker would recompile its imports
# (importing TensorFlow: 22 s without .pyc files, measured here).
$(STAMP): requirements.txt pyproject.toml Makefile
	@if [ ! -x $(PY) ]; then \
		if command -v uv >/dev/null 2>&1; then uv venv -q -p python3 $(VENV); else python3 -m venv $(VENV); fi; \
	fi
	@if command -v uv >/dev/null 2>&1; then \
		uv pip install -q --python $(PY) -r requirements.txt -e .; \
	else \
		$(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -r requirements.txt -e .; \
	fi
	@# the build's leftover egg-info: with src/ on sys.path (the editable install) Airflow would find
	@# dagspec's plugin entry point twice and log "Plugin 'dagspec' already registered" in every task
	@rm -rf src/dagspec.egg-info
	@$(PY) -m compileall -q -j 0 $$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') src dags jobs \
		>/dev/null || echo "compileall: some files did not compile (they still import, only slower)"
	@$(VENV)/bin/dagspec jvm-archive || echo "dagspec jvm-archive failed: Spark JVMs start without the class archive"
	@touch $(STAMP)

bootstrap: $(STAMP)

demo: bootstrap
	$(VENV)/bin/dagspec run $(DEMO_SPEC)

lint: bootstrap
	$(VENV)/bin/ruff check src tests dags jobs bench plugins
	$(VENV)/bin/ruff format --check src tests dags jobs bench plugins
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	@long=$$(find src tests dags jobs bench plugins -name '*.py' -exec awk 'END { if (NR > 400) print FILENAME ": " NR " lines" }' {} \;); \
		if [ -n "$$long" ]; then echo "files over 400 lines:"; echo "$$long"; exit 1; fi

format: bootstrap
	$(VENV)/bin/ruff format src tests dags jobs bench plugins
	$(VENV)/bin/ruff check --fix src tests dags jobs bench plugins

# The UI test drives Debian's headless Chromium; install it when missing (CI runs as root).
browser:
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing chromium and chromium-driver for the UI test"; \
			flock /var/lock/dagspec-apt.lock apt-get update -qq >/dev/null \
				&& DEBIAN_FRONTEND=noninteractive flock /var/lock/dagspec-apt.lock apt-get install -y -qq chromium chromium-driver >/dev/null; \
		else echo "chromium/chromedriver missing and not root: the UI browser test will be skipped"; fi; \
	fi

test: bootstrap lint browser
	$(VENV)/bin/pytest -n 2 --dist loadfile $(PYTEST_ARGS)

clean:
	-@[ -x $(VENV)/bin/dagspec ] && $(VENV)/bin/dagspec cluster down; [ -x $(VENV)/bin/dagspec ] && $(VENV)/bin/dagspec airflow down
	rm -rf .dagspec spark-warehouse metastore_db derby.log

# services: a local Spark standalone cluster and the Airflow UI, as background processes
# (PIDs and logs in .dagspec/run/; see docs/deployment.md)
.PHONY: cluster-up cluster-down airflow-up airflow-down
cluster-up: bootstrap
	$(VENV)/bin/dagspec cluster up
cluster-down:
	$(VENV)/bin/dagspec cluster down
airflow-up: bootstrap
	$(VENV)/bin/dagspec airflow up $(if $(PORT),--port $(PORT))
airflow-down:
	$(VENV)/bin/dagspec airflow down

# The docker compose stack, for real: a Docker engine of its own, images (built from Debian
# packages when no registry answers), compose up, every shipped pipeline and the faults of
# tests/stack (see docs/deployment.md). Needs root on a machine without Docker (apt, dockerd).
.PHONY: test-stack
test-stack: bootstrap
	deploy/ci/stack.sh $(PYTEST_ARGS)
