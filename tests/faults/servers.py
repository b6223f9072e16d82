"""Private Redis and PostgreSQL servers for the outage scenarios, so restarting or killing them
never disturbs the machine's own (which the rest of the suite uses)."""

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import psycopg
import redis

from tests.helpers import free_port, wait_until


def _wait(check, what: str, timeout: float = 30) -> None:
    wait_until(check, timeout=timeout, what=f"{what} to come up")


class RedisServer:
    """redis-server on a free loopback port; with appendonly, a clean restart keeps the queues."""

    def __init__(self, data_dir: Path):
        self.dir, self.port, self.proc = data_dir, free_port(), None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                *("redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir)),
                *("--appendonly", "yes", "--appendfsync", "always", "--save", ""),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait(self._answers, "redis-server")
        return self

    def _answers(self) -> bool:
        try:
            return redis.Redis.from_url(self.url, socket_timeout=1).ping()
        except redis.RedisError:
            return False

    def restart(self) -> None:
        """A clean restart: SHUTDOWN writes the append-only file, the new server reads it back."""
        with contextlib.suppress(redis.ConnectionError):  # the connection closes as the server exits
            redis.Redis.from_url(self.url).shutdown()
        self.proc.wait(30)
        self.start()

    def kill_and_lose_everything(self) -> None:
        """SIGKILL, and start again on an empty data directory: every queued message is gone."""
        self.proc.kill()
        self.proc.wait(30)
        shutil.rmtree(self.dir)
        self.start()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


class PostgresServer:
    """A throw-away PostgreSQL cluster (initdb) on a free port, run as the postgres user when root."""

    def __init__(self):
        binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        self.bin = Path(binaries[-1]).parent if binaries else Path(shutil.which("initdb") or "initdb").parent
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="crawlhub-pg-"))
        self.as_user = []
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/crawlhub"

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_user, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> "PostgresServer":
        data = self.dir / "data"
        if not data.exists():
            self._run(str(self.bin / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
        self._pg_ctl("start")
        admin = f"postgres://postgres@127.0.0.1:{self.port}/postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = 'crawlhub'").fetchone():
                conn.execute("CREATE DATABASE crawlhub")
        return self

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(self.bin / "pg_ctl"), action, "-D", str(self.dir / "data"), "-w", "-o", options,
            "-l", str(self.dir / "server.log"), *extra,
        )  # fmt: skip

    def restart(self) -> None:
        """A fast restart: every client connection is cut, in-flight transactions roll back."""
        self._pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
