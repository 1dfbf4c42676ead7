# Two commands on a fresh machine: `make run` and `make test`. Every target
# bootstraps what it needs: a pinned uv in .tools/, then the locked environment
# in .venv/ (uv.lock is the single source of versions).
PYTHON ?= python3
UV_VERSION := 0.13.9
UV := .tools/bin/uv
VENV := .venv
export UV_PYTHON := $(PYTHON)
export UV_PYTHON_DOWNLOADS := never
# Installed packages compiled to bytecode once, at install: where PYTHONDONTWRITEBYTECODE
# is set (as on our CI machines) every process would otherwise compile SQLAlchemy,
# Litestar and the rest from source each time it starts (`jobqueue serve` ready in 3.3 s
# instead of 1.5; the tests start hundreds of processes).
export UV_COMPILE_BYTECODE := 1

.PHONY: install prerequisites run test test-docker lint typecheck docs unit integration integration-pgbouncer bench bench-dashboard clean

$(UV):
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet "uv==$(UV_VERSION)"

$(VENV)/.installed: $(UV) uv.lock pyproject.toml
	$(UV) sync --frozen --all-extras
	touch $@

install: $(VENV)/.installed

# What the tests run besides Python (PgBouncer, psql, PostgreSQL 15's server, openssl),
# from Debian's packages: installed with apt when missing (as root, else `sudo -n`), else
# one message says what to install. Without them the tests would fail one by one.
prerequisites:
	@scripts/prerequisites.sh

run: install
	$(VENV)/bin/jobqueue serve

lint: install
	$(VENV)/bin/ruff check src tests migrations
	$(VENV)/bin/ruff format --check src tests migrations

typecheck: install
	$(VENV)/bin/mypy

# The user guide and reference (mkdocs.yml, docs/), built strictly: a broken link or
# anchor, a missing snippet or an unresolved reference fails it. The site goes to site/
# (gitignored); `$(VENV)/bin/mkdocs serve` shows it while you edit. NO_MKDOCS_2_WARNING
# silences mkdocs-material's banner about MkDocs 2, printed at every build. Not --quiet:
# it drops the warnings that --strict counts, and the build would pass whatever they say.
DOCS_SITE := site

docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir $(DOCS_SITE)

unit: install prerequisites
	$(VENV)/bin/pytest tests/unit -q

integration: install prerequisites
	$(VENV)/bin/pytest tests/integration -q -n auto

# The whole integration suite once more, its services and engines through PgBouncer
# (README, "Behind PgBouncer"); minutes, so not part of `make test`.
integration-pgbouncer: install prerequisites
	JOBQUEUE_TEST_PGBOUNCER=1 $(VENV)/bin/pytest tests/integration -q -n auto

# Every test: the parallel suite, and beside it the tests marked `idle` (scripts/test.sh).
test: prerequisites lint typecheck docs
	scripts/test.sh

# The one test that needs a Docker engine (marked `docker`, left out of every other run by
# pyproject.toml's `-m 'not docker'`): PostgreSQL from testcontainers' postgres:16 image.
test-docker: install
	$(VENV)/bin/pytest -m docker

bench: install
	$(VENV)/bin/jobqueue bench $(BENCH_ARGS)

# Every dashboard page on 5.5M jobs; the table is kept in build/dashboard-pg and reused.
bench-dashboard: install
	$(VENV)/bin/jobqueue bench dashboard --data-dir build/dashboard-pg \
		--markdown build/dashboard-bench.md $(BENCH_ARGS)

clean:
	rm -rf .tools $(VENV) .mypy_cache .pytest_cache .ruff_cache $(DOCS_SITE)
