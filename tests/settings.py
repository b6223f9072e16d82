"""Test settings: the real PostgreSQL and Redis of the machine, short leases so recovery is quick."""

import os
import tempfile

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/crawlhub")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("CRAWLHUB_VAR_DIR", tempfile.mkdtemp(prefix="crawlhub-test-"))
os.environ.setdefault("CRAWL_LEASE_SECONDS", "10")
os.environ.setdefault("CRAWL_REPUBLISH_SECONDS", "8")
os.environ.setdefault("CRAWL_RETRY_BASE_SECONDS", "0.5")
os.environ.setdefault("CRAWL_CONNECT_TIMEOUT", "3")
os.environ.setdefault("CRAWL_READ_TIMEOUT", "3")
os.environ.setdefault("CRAWL_TOTAL_TIMEOUT", "8")
os.environ.setdefault("CONSOLE_HEALTH_BUCKET_SECONDS", "1")  # health counters: the tests' recrawls are seconds apart

from crawlproject.settings import *  # noqa: F403
