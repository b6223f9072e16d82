"""Test settings: the real PostgreSQL and Redis of the machine, short leases so recovery is quick."""

import os
import tempfile

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/crawlhub")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")
# `make test` runs the suite in parallel (pytest-xdist): each test process gets its own Redis database
# (15, 13, 11, ... below the configured one) as pytest-django gives it its own test database, so one
# process's workers never take another's messages and a test's flushdb clears only its own.
_XDIST = os.environ.get("PYTEST_XDIST_WORKER", "")
if _XDIST.startswith("gw") and _XDIST[2:].isdigit() and os.environ.get("CRAWLHUB_TEST_BROKER_OF") != _XDIST:
    os.environ["CRAWLHUB_TEST_BROKER_OF"] = _XDIST  # once: subprocesses inherit the chosen URL
    _base, _, _db = os.environ["CELERY_BROKER_URL"].rpartition("/")
    if _db.isdigit():
        os.environ["CELERY_BROKER_URL"] = f"{_base}/{(int(_db) - 2 * int(_XDIST[2:])) % 16}"
os.environ.setdefault("CRAWLHUB_VAR_DIR", tempfile.mkdtemp(prefix="crawlhub-test-"))
os.environ.setdefault("CRAWL_LEASE_SECONDS", "10")
os.environ.setdefault("CRAWL_REPUBLISH_SECONDS", "8")
os.environ.setdefault("CRAWL_RETRY_BASE_SECONDS", "0.5")
os.environ.setdefault("CRAWL_CONNECT_TIMEOUT", "3")
os.environ.setdefault("CRAWL_READ_TIMEOUT", "3")
os.environ.setdefault("CRAWL_TOTAL_TIMEOUT", "8")
os.environ.setdefault("CONSOLE_HEALTH_BUCKET_SECONDS", "1")  # health counters: the tests' recrawls are seconds apart

from crawlproject.settings import *  # noqa: E402, F403
