"""Facts about the machine and the servers for the record, and Redis's command counters."""

import os
import platform
import shutil
import subprocess
import time
from importlib import metadata

import redis

PACKAGES = ("django", "celery", "kombu", "redis", "httpx", "lxml", "psycopg")


def machine_facts(*, redis_url: str | None = None, postgres_version: str | None = None) -> dict:
    versions = {name: _version(name) for name in PACKAGES}
    versions["nginx"] = _nginx_version()
    if redis_url:
        versions["redis_server"] = redis_info(redis_url, "server").get("redis_version")
    if postgres_version:
        versions["postgresql"] = postgres_version
    return {
        "cores": os.cpu_count(),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "versions": versions,
    }


def speed_probe() -> float:
    """CPU seconds of a fixed pure-Python loop: this machine's speed at the moment. A shared VM's
    speed moves by a quarter from one minute to the next here, so figures of different runs are
    compared with this beside them (lower is faster)."""
    started, total = time.process_time(), 0
    for i in range(3_000_000):
        total += i
    return round(time.process_time() - started, 3)


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _nginx_version() -> str | None:
    if not shutil.which("nginx"):
        return None
    done = subprocess.run(["nginx", "-v"], capture_output=True, text=True)
    return done.stderr.strip().rsplit("/", 1)[-1] or None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def redis_info(url: str, section: str) -> dict:
    client = redis.Redis.from_url(url, socket_timeout=5)
    try:
        return client.info(section)
    finally:
        client.close()


def redis_commands(url: str) -> int:
    """Commands Redis has executed since its stats were reset, from every client (INFO commandstats)."""
    stats = redis_info(url, "commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k.startswith("cmdstat_"))
