"""Scratch state for a run, so its figures are clean and nothing of the user's is touched.

Embedded: a fresh SQLite file and filesystem-broker folder under <var>/bench/embedded.
Distributed: a fresh database `<configured name>_bench` on the configured PostgreSQL server (dropped
and created), the configured Redis (its stage queues must be empty), state under <var>/bench/distributed.
"""

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg
import redis
from psycopg import sql

from bench import REPO, BenchError
from crawlproject.queues import STAGE_QUEUES


class ScratchError(BenchError):
    pass


@dataclass
class Scratch:
    mode: str
    dir: Path
    env: dict  # for every subprocess of the run (settings from the environment)
    db: dict  # a Django DATABASES entry for the bench's own reads
    broker_url: str | None = None  # Redis, in distributed mode

    @property
    def sql_count_dir(self) -> Path:
        return self.dir / "sqlcount"

    def counted_env(self) -> dict:
        """The environment of the crawl and its workers: their statements are counted."""
        return {**self.env, "CRAWLHUB_SQL_COUNT_DIR": str(self.sql_count_dir)}


def _fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _base_env(directory: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "CRAWLHUB_SQL_COUNT_DIR"}
    return env | {
        "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "crawlproject.settings"),
        "CRAWLHUB_VAR_DIR": str(directory),
        "CRAWLHUB_MEDIA_ROOT": str(directory / "assets"),
        "CRAWLHUB_STORAGE": "filesystem",
    }


def scratch_embedded(var_dir: Path) -> Scratch:
    directory = _fresh_dir(var_dir / "bench" / "embedded")
    db_path = directory / "db.sqlite3"
    env = _base_env(directory) | {
        "DATABASE_URL": f"sqlite:///{db_path}",
        "CELERY_BROKER_URL": "filesystem://localhost/",
    }
    db = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(db_path), "OPTIONS": {"timeout": 20}}
    return Scratch("embedded", directory, env, db)


def scratch_distributed(var_dir: Path, *, database: dict, broker_url: str) -> Scratch:
    """Needs the configured database to be PostgreSQL and the broker Redis; recreates `<name>_bench`."""
    if "postgresql" not in database["ENGINE"]:
        raise ScratchError(f"distributed mode needs DATABASE_URL to be PostgreSQL (it is {database['ENGINE']})")
    if not broker_url.startswith(("redis://", "rediss://")):
        raise ScratchError(f"distributed mode needs CELERY_BROKER_URL to be Redis (it is {broker_url.split(':')[0]})")
    _broker_check(broker_url)
    db = {**database, "NAME": f"{database['NAME']}_bench"}
    _pg_recreate(db)
    directory = _fresh_dir(var_dir / "bench" / "distributed")
    env = _base_env(directory) | {"DATABASE_URL": _pg_url(db), "CELERY_BROKER_URL": broker_url}
    return Scratch("distributed", directory, env, db, broker_url)


def _broker_check(url: str) -> None:
    client = redis.Redis.from_url(url, socket_timeout=5)
    try:
        waiting = {q: client.llen(q) for q in STAGE_QUEUES}
    except redis.RedisError as exc:
        raise ScratchError(f"cannot reach the broker: {exc}") from None
    finally:
        client.close()
    if any(waiting.values()):
        raise ScratchError(
            f"the broker's stage queues hold messages {waiting}: they would feed the bench's workers. "
            "Use an idle Redis database (CELERY_BROKER_URL=redis://host:6379/N) or drain it first"
        )


def _pg_recreate(db: dict) -> None:
    params = {"host": db.get("HOST") or None, "port": db.get("PORT") or None, "user": db.get("USER") or None}
    params |= {"password": db.get("PASSWORD") or None, "dbname": "postgres", "autocommit": True}
    try:
        with psycopg.connect(**{k: v for k, v in params.items() if v is not None}) as conn:
            name = sql.Identifier(db["NAME"])
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    except psycopg.Error as exc:
        raise ScratchError(f"cannot create the scratch database {db['NAME']}: {exc}") from None


def _pg_url(db: dict) -> str:
    user = quote(db.get("USER") or "", safe="")
    password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
    host = quote(db.get("HOST") or "", safe="")  # a socket folder is percent-encoded
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{user}{password}@{host}{port}/{quote(db['NAME'], safe='')}"


def manage(args: list[str], env: dict, log: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    with open(log, "ab") as out:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=timeout,
        )
    if done.returncode != 0:
        raise ScratchError(f"manage.py {' '.join(args)} failed: {log.read_text(errors='replace')[-1500:]}")
    return done


def scratch_prepare(scratch: Scratch) -> None:
    """Migrate the scratch database."""
    manage(["migrate", "--noinput", "-v", "0"], scratch.env, scratch.dir / "setup.log")
