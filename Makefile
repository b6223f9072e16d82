# crawlhub: the three commands a new user needs are `make crawl URL=...`, `make test` and `make serve`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
URL ?=
ARGS ?=
PYTEST_ARGS ?=
# `make test` runs the suite in TEST_JOBS processes (pytest-xdist, one test file per process at a time, the
# longest first: tests/durations.json): most tests wait on workers, servers and the network, so two processes
# fill two cores. TEST_JOBS=0 runs it in one.
TEST_JOBS ?= 2
# Python caches compiled modules in __pycache__; some images turn that off (PYTHONDONTWRITEBYTECODE=1),
# and then every process compiles the project again (0.4 s each: tests start hundreds of them).
unexport PYTHONDONTWRITEBYTECODE
PORT ?= 8000

.PHONY: help install install-dev install-web migrate crawl serve test test-quick faults bench lint format worker-fetch worker-extract worker-download worker-render beat flower services system-deps clean

help:
	@echo "make crawl URL=https://example.com/ [ARGS='--max-pages 100']   crawl on the embedded default (SQLite, no servers)"
	@echo "make test                                                      run the whole test suite"
	@echo "make test-quick                                                the tests that start no worker or server process (a few minutes)"
	@echo "make serve [PORT=8000]                                         the console (admin, overview, API) with its workers and beat"
	@echo "make faults                                                    the fault-injection suite, with its ledger table"
	@echo "make bench                                                     throughput beside the Scrapy peer (bench/README.md)"
	@echo "make worker-fetch | worker-extract | worker-download | worker-render | beat    distributed processes (set DATABASE_URL, CELERY_BROKER_URL)"

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed-base: requirements/base.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements/base.txt
	touch $@

$(VENV)/.installed-dev: requirements/base.txt requirements/dev.txt requirements/prod.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements/dev.txt -r requirements/prod.txt
	touch $@ $(VENV)/.installed-base $(VENV)/.installed-web

$(VENV)/.installed-web: requirements/base.txt requirements/prod.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements/prod.txt
	touch $@ $(VENV)/.installed-base

install: $(VENV)/.installed-base
install-dev: $(VENV)/.installed-dev
install-web: $(VENV)/.installed-web

migrate: install
	$(BIN)/python manage.py migrate --noinput -v 0

crawl: migrate
	@test -n "$(URL)" || (echo "usage: make crawl URL=https://example.com/ [ARGS=...]" >&2; exit 2)
	$(BIN)/python manage.py crawl $(URL) $(ARGS)

# The console on 127.0.0.1:$(PORT): web server, embedded workers and beat in one command (Ctrl-C stops all).
serve: install-web
	$(BIN)/python manage.py serve --port $(PORT) $(ARGS)

services:
	@bash scripts/services.sh

system-deps:
	@bash scripts/system-deps.sh

test: install-dev system-deps services
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The tests that start no worker or server process: no Celery worker or beat, no `manage.py crawl`, no web
# server (those are marked `integration`). They still use PostgreSQL, Redis, loopback sites and Chromium.
test-quick: install-dev services
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadfile --no-loadscope-reorder -m "not integration and not fault" $(PYTEST_ARGS)

# The whole fault-injection suite on a few thousand pages (tests/faults/), the fuzzers at full depth, then the other suites' long fault
# scenarios (marked `fault`: kills, outages, refusals that last); `make test` runs a quick subset.
faults: install-dev system-deps services
	CRAWLHUB_FAULTS=full $(BIN)/python -m pytest tests/faults tests/core/test_fuzz_decoding.py tests/console/test_api_fuzz.py $(PYTEST_ARGS)
	CRAWLHUB_FAULTS=full $(BIN)/python -m pytest -m fault tests --ignore=tests/faults $(PYTEST_ARGS)

# The benchmark: crawlhub distributed and embedded, then Scrapy, on the same site; prints the ratio table
# (also var/bench/latest.md and .json). Uses the optional shared benchmark (a shared/bench folder beside the repository) when present.
# Then the broad scenarios, crawlhub beside the Scrapy broad peer (var/bench/broad-*.md): 100 polite hosts of
# 31 pages each, and 1,000 hosts of 10 pages, where the CPU, not politeness, is the limit.
# About 10 min; run nothing else.
bench: install-dev services
	$(BIN)/python -m bench.compare $(ARGS)
	$(BIN)/python -m bench.broad
	$(BIN)/python -m bench.broad --hosts 1000 --pages 10

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install-dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

worker-fetch: install
	$(BIN)/celery -A crawlproject worker -Q fetch,control -n fetch@%h -l INFO
worker-extract: install
	$(BIN)/celery -A crawlproject worker -Q extract,control -n extract@%h -l INFO
worker-download: install
	$(BIN)/celery -A crawlproject worker -Q download,control -n download@%h -l INFO
worker-render: install
	$(BIN)/celery -A crawlproject worker -Q render,control -n render@%h -c 1 -l INFO
beat: install
	$(BIN)/celery -A crawlproject beat -l INFO
flower: install
	@$(BIN)/python -c "import flower" 2>/dev/null || $(BIN)/pip install -q -r requirements/prod.txt
	PYTHON=$(BIN)/python bash scripts/flower.sh

clean:
	rm -rf var/db.sqlite3* var/broker var/assets var/tmp var/log
