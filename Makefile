# The two commands: `make run` and `make test`. Everything else is a step of theirs.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
TOOLS := $(CURDIR)/.tools
NU_VERSION ?= 0.108.0
AXE_VERSION ?= 4.14.1
PORT ?= 8000
export PATH := $(TOOLS)/bin:$(CURDIR)/$(VENV)/bin:$(PATH)
export REGISTRY_DATA_DIR ?= $(CURDIR)/var

.PHONY: port-free run test lint bench install install-dev tools services migrate examples clean cluster cluster-stop

$(VENV)/.installed: requirements.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python 3.11 is required)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -r requirements.txt
	$(PIP) install --no-deps -e .
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(PIP) install -r requirements-dev.txt
	@touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# Nushell (from npm) so that `.nu` files are parsed and extension tests run for real.
$(TOOLS)/bin/nu:
	@mkdir -p $(TOOLS)/bin
	@if command -v npm >/dev/null; then \
	  npm install --silent --no-audit --no-fund --prefix $(TOOLS) nushell@$(NU_VERSION) && \
	  ln -sf $(TOOLS)/node_modules/@nushell/linux-x64/bin/nu $(TOOLS)/bin/nu; \
	else echo "warning: npm not found; Nushell checks will be reported as skipped"; fi

# axe-core (from npm): the accessibility engine the browser tests inject into every catalog page.
$(TOOLS)/node_modules/axe-core/axe.min.js:
	@mkdir -p $(TOOLS)
	@if command -v npm >/dev/null; then \
	  npm install --silent --no-audit --no-fund --prefix $(TOOLS) axe-core@$(AXE_VERSION); \
	else echo "warning: npm not found; the accessibility audit will be reported as skipped"; fi

tools: $(TOOLS)/bin/nu $(TOOLS)/node_modules/axe-core/axe.min.js

# Debian packages for the real services the tests start themselves (PostgreSQL, Redis, the CNCF
# distribution registry, nginx in front of the registry as docs/deploy.md configures it), the
# benchmark's load generator (wrk), the browser the catalog's browser test drives (Chromium) and
# the OCI client the OCI tests drive (skopeo), installed with apt-get as root (or through
# password-less sudo).
services:
	@missing=""; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v wrk >/dev/null || missing="$$missing wrk"; \
	test -x /usr/sbin/nginx || missing="$$missing nginx"; \
	test -x /usr/bin/chromium || missing="$$missing chromium"; \
	command -v skopeo >/dev/null || missing="$$missing skopeo"; \
	command -v docker-registry >/dev/null || missing="$$missing docker-registry"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt=""; elif sudo -n true 2>/dev/null; then apt="sudo -n"; \
	  else echo "error: cannot install$$missing: run make as root (or with password-less sudo)"; exit 1; fi; \
	  command -v apt-get >/dev/null || { echo "error: cannot install$$missing: apt-get not found"; exit 1; }; \
	  echo "installing$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  ($$apt apt-get install -y -q $$missing >/dev/null 2>&1 \
	    || ($$apt apt-get update -q >/dev/null && $$apt apt-get install -y -q $$missing >/dev/null)) \
	    || { echo "error: could not install$$missing with apt-get"; exit 1; }; \
	fi

migrate: install
	$(PY) manage.py migrate --noinput -v 0
	$(PY) manage.py collectstatic --noinput -v 0

# What the examples' provenance and the served answers name as the registry's URL (their download
# links, the builder id), unless it is set: this address, not http://localhost/.
run examples: export REGISTRY_PUBLIC_URL ?= http://127.0.0.1:$(PORT)

# The signed index's keys and metadata first (on first start), so that the examples' builds sign
# their provenance and index entries as they publish.
examples: migrate
	@$(PY) manage.py trust init --if-missing
	$(PY) manage.py publish --skip-existing extensions/providers/* extensions/taskservs/* extensions/clusters/*

# Before anything is installed or touches the data: a registry already serving on PORT is said in one line.
port-free:
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (Python 3.11 is required)"; exit 1; }
	@$(PYTHON) -c "import socket, sys; s = socket.socket(); busy = s.connect_ex(('127.0.0.1', $(PORT))) == 0; sys.exit('port $(PORT) on 127.0.0.1 is in use (another registry?): stop it, or run make run PORT=8001; nothing was changed' if busy else 0)"

run: port-free install tools migrate examples
	@$(PY) manage.py reapbuilds >/dev/null   # builds a previous run left running (no beat here)
	@$(PY) manage.py sweepstorage >/dev/null
	@echo "serving the registry on http://127.0.0.1:$(PORT) (Ctrl-C stops it)"
	$(VENV)/bin/gunicorn registry.wsgi --bind 127.0.0.1:$(PORT) --workers 2 --threads 4 \
	  --worker-class gthread --timeout 300 --access-logfile - --no-control-socket

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check extensions clients registry builds
	$(VENV)/bin/mypy extensions clients registry builds

# The whole suite twice: on SQLite, then on a private PostgreSQL server (`--postgres`, see
# tests/services.py). Both runs always run; the summary of each is repeated at the end.
test: install-dev tools services lint
	@set -o pipefail; status=0; log=$$(mktemp -d); color=$$([ -t 1 ] && echo yes || echo no); \
	echo "== the test suite on SQLite"; \
	$(PY) -m pytest -n $${PYTEST_WORKERS:-auto} --dist loadgroup --color=$$color $(PYTEST_ARGS) \
	  | tee $$log/sqlite || status=1; \
	echo "== the test suite on PostgreSQL"; \
	$(PY) -m pytest -n $${PYTEST_WORKERS:-auto} --dist loadgroup --color=$$color --postgres $(PYTEST_ARGS) \
	  | tee $$log/postgres || status=1; \
	echo "== SQLite:     $$(tail -n 1 $$log/sqlite | tr -d '=' | sed 's/^ *//')"; \
	echo "== PostgreSQL: $$(tail -n 1 $$log/postgres | tr -d '=' | sed 's/^ *//')"; \
	rm -rf $$log; exit $$status

bench: install-dev tools services
	$(PY) -m bench $(BENCH_ARGS)

# The registry distributed on this machine, as docs/deploy.md lays it out: PostgreSQL, Redis, moto's
# S3, two gunicorn web nodes, two Celery workers, beat and nginx in front, on 127.0.0.1, with the
# examples published (`python -m cluster`, state and logs in var/cluster/). It prints the address
# and a token; `make cluster-stop` stops exactly the processes it started.
cluster: install-dev tools services
	$(PY) -m cluster start $(CLUSTER_ARGS)

cluster-stop:
	$(PY) -m cluster stop $(CLUSTER_ARGS)

clean:
	rm -rf $(VENV) $(TOOLS) var dist .mypy_cache .ruff_cache .hypothesis
