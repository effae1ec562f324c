# Vouch: `make run` to run it locally, `make test` to run the suite. See README.md.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
# The Stripe sandbox's port under `make run` (empty: 12111, or the port of STRIPE_API_BASE).
SANDBOX_PORT ?=
APPS := config core accounts envelopes disputes verification receipts reconciliation providers stripe_sandbox stripe_contract ops agents

.DEFAULT_GOAL := help
.PHONY: help run reset test inspector inspector-test soak lint docs docs-serve fidelity typecheck check-migrations check-deploy lock clean mutate

help:
	@echo "make run    run Vouch locally on http://127.0.0.1:8000 (web, worker, beat, a Stripe sandbox on 12111); Ctrl-C stops all"
	@echo "           a port taken? make run PORT=8080 moves the web server, make run SANDBOX_PORT=12112 the sandbox"
	@echo "make reset  forget what make run kept: its database and the Stripe sandbox's state, together (stop make run first)"
	@echo "make test   run the whole test suite against PostgreSQL (DATABASE_URL, default local server)"
	@echo "make inspector-test   the official MCP Inspector CLI against /mcp (installs Node 22 and the Inspector into .ci/node with npm)"
	@echo "make lint   ruff check and format check, and the import contracts;  make typecheck: mypy on the apps"
	@echo "make docs   build the docs site (mkdocs --strict) into var/site"
	@echo "make fidelity   docs/sandbox-fidelity.md from the conformance report of the last whole make test"
	@echo "make soak   bench/soak.py, the short soak CI runs (SOAK_ARGS=\"--operations 10000 --kills 20\" for the full one)"
	@echo "make lock   re-pin requirements/*.txt from pyproject.toml"

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "Vouch needs Python >= 3.11; set PYTHON=python3.11 (or newer)."; exit 1; }
	@echo "==> Creating $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed-base: requirements/base.txt | $(PY)
	@echo "==> Installing dependencies (the first time takes a minute)"
	$(PY) -m pip install --progress-bar off -r requirements/base.txt
	@touch $@

$(VENV)/.installed-dev: requirements/dev.txt | $(PY)
	@echo "==> Installing development dependencies (the first time takes a minute)"
	$(PY) -m pip install --progress-bar off -r requirements/dev.txt
	@touch $@ $(VENV)/.installed-base

run: $(VENV)/.installed-base
	DJANGO_SETTINGS_MODULE=config.settings.local $(PY) manage.py run_local --port $(PORT)$(if $(SANDBOX_PORT), --sandbox-port $(SANDBOX_PORT))

# The SQLite database and the sandbox's state file under var/ (VOUCH_VAR_DIR), and the queued
# tasks: one without the other would name objects the other never held.
reset: $(VENV)/.installed-base
	DJANGO_SETTINGS_MODULE=config.settings.local $(PY) manage.py run_local --reset

test: $(VENV)/.installed-dev
	DJANGO_SETTINGS_MODULE=config.settings.test $(PY) -m pytest $(PYTEST_ARGS)

# The official MCP Inspector's CLI against /mcp (tests/inspector): Node 22 and the Inspector,
# pinned, installed from the npm registry into .ci/node (npm must be on the machine).
NODE_DIR ?= .ci/node
INSPECTOR_PACKAGES = node@22.23.3 @modelcontextprotocol/inspector@2.12.0
$(NODE_DIR)/.installed:
	@command -v npm >/dev/null || { echo "make inspector needs npm (apt-get install npm)"; exit 1; }
	npm install --no-audit --no-fund --loglevel=error --prefix $(NODE_DIR) $(INSPECTOR_PACKAGES)
	@touch $@
inspector: $(NODE_DIR)/.installed
inspector-test: $(VENV)/.installed-dev $(NODE_DIR)/.installed
	VOUCH_NODE_DIR=$(NODE_DIR) DJANGO_SETTINGS_MODULE=config.settings.test $(PY) -m pytest tests/inspector

# Money operations under provider faults and kill -9, then the conservation checks
# (bench/README.md, "Soak"). Needs PostgreSQL and Redis, as `make test` does.
SOAK_ARGS ?= --operations 200 --kills 2 --clients 4 --fault-rate 0.05 --seed 1 --settle-timeout 150
soak: $(VENV)/.installed-dev
	$(PY) bench/soak.py $(SOAK_ARGS)

# Mutation testing of the core logic (bench/mutate.py, bench/MUTATION.md): a score per module and
# every surviving mutant; the report goes into bench/MUTATION.md. Not run by CI (minutes on 2
# cores). MUTATE_ARGS="--module envelopes.money --jobs 2" for one module.
MUTATE_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/vouch_mutate
MUTATE_ARGS ?=
mutate: $(VENV)/.installed-dev
	DATABASE_URL=$(MUTATE_DATABASE_URL) $(PY) bench/mutate.py --report bench/MUTATION.md $(MUTATE_ARGS)

# ruff, then the import contracts of pyproject.toml's [tool.importlinter] (STYLE rules 13 and 15:
# the floors, the never-arrows, no ignored imports).
lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-cache

# The docs site (mkdocs.yml, docs/): --strict turns a broken link or a page left out of the nav
# into an error. The site opens from files, search included, with no server and no network
# (tests/browser/test_docs_site.py); `make docs-serve` serves it on http://127.0.0.1:8001 and
# rebuilds it as you edit.
# NO_MKDOCS_2_WARNING: Material's end-of-life notice (2027-05-05), said once in docs/architecture.md.
docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir var/site
	@echo "The docs site is in var/site: open var/site/index.html in a browser"

docs-serve: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8001

# docs/sandbox-fidelity.md from the conformance report the last whole `make test` wrote
# (var/conformance/report.json; SPEC §12.1, stripe_contract/report.py).
FIDELITY_REPORT ?= var/conformance/report.json
fidelity: $(VENV)/.installed-dev
	@test -f $(FIDELITY_REPORT) || { echo "No $(FIDELITY_REPORT): run the whole suite first (make test)."; exit 1; }
	@{ printf '# Fidelity to Stripe\n\n'; \
	  printf 'What the conformance suite (SPEC §12.1, [Stripe and the sandbox](sandbox.md#fidelity-to-stripe))\n'; \
	  printf 'measured in the whole test suite: written by `make fidelity` from the report `make test` leaves\n'; \
	  printf 'in `var/conformance/report.json`. Do not edit by hand.\n\n'; \
	  $(PY) -m stripe_contract report $(FIDELITY_REPORT) | sed 's/^### /## /'; } > docs/sandbox-fidelity.md
	@echo "docs/sandbox-fidelity.md written from $(FIDELITY_REPORT)"

typecheck: $(VENV)/.installed-dev
	$(VENV)/bin/mypy $(APPS)

# Against a throw-away SQLite database: the check needs settings, not data.
check-migrations: $(VENV)/.installed-dev
	VOUCH_VAR_DIR=$$(mktemp -d) DJANGO_SETTINGS_MODULE=config.settings.local \
		$(PY) manage.py makemigrations --check --dry-run

check-deploy: $(VENV)/.installed-dev
	DJANGO_SETTINGS_MODULE=config.settings.production \
	SECRET_KEY=ci-dummy-secret-key-never-used-to-serve-anything-0123456789abcdef \
	ALLOWED_HOSTS=vouch.example.com \
	DATABASE_URL=postgres://vouch@db.example.com:5432/vouch \
	CELERY_BROKER_URL=redis://redis.example.com:6379/0 \
	CACHE_URL=redis://redis.example.com:6379/1 \
	STRIPE_API_KEY=sk_live_dummy STRIPE_WEBHOOK_SECRET=whsec_dummy VOUCH_ENVIRONMENT=production \
	MCP_RESOURCE_URL=https://vouch.example.com/mcp \
	DJANGO_EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend \
		$(PY) manage.py check --deploy --fail-level WARNING

lock: | $(PY)
	$(PY) -m pip install --quiet uv
	$(VENV)/bin/uv pip compile pyproject.toml -q --python-version 3.11 \
		--custom-compile-command "make lock" -o requirements/base.txt
	$(VENV)/bin/uv pip compile pyproject.toml -q --python-version 3.11 --extra dev \
		--custom-compile-command "make lock" -o requirements/dev.txt

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
