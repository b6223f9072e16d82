"""python manage.py serve [--port 8000]: the console (admin, overview, API) with the workers and the
scheduler it needs, in one command, so that Start in the admin crawls.

On the embedded default (filesystem broker, SQLite) it starts everything itself: the database is
migrated, a first admin user is made if there is none, then a Celery worker on every stage queue,
celery beat (recrawl ticks, the reaper, job ends) and the web server (gunicorn, static files served
by whitenoise). Distributed (a real broker), the same web app runs; workers and beat are started
only when asked (--workers N, --beat), since they usually run as their own services.
"""

import argparse
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from console.runs.workers import workers_alive
from core.net.guard import refuse_services
from crawl.apps import own_services
from crawlproject.envsafety import private_file
from crawlproject.processes import EmbeddedWorker

READY_TIMEOUT = 90.0
BEAT_RESTART_SECONDS = 10.0  # a restarted beat that dies this soon again ends the command


class Command(BaseCommand):
    help = "Run the web console with its workers and scheduler (embedded default: all in one command)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"), help="address to listen on")
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")), help="port (8000)")
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            help="worker processes to start (default: 2 with the embedded broker, 0 otherwise)",
        )
        parser.add_argument(
            "--beat",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="run celery beat here (default: yes with the embedded broker, no otherwise)",
        )
        parser.add_argument("--web-workers", type=int, default=2, help="gunicorn worker processes (2)")

    def handle(self, *args, **opts):
        if not 1 <= opts["port"] <= 65535:
            raise CommandError("--port must be from 1 to 65535")
        console_base_url_default(opts["host"], opts["port"])
        _console_address_publish(opts["host"], opts["port"])
        # Ctrl-C and SIGTERM stop it all, also where SIGINT came ignored (started as a background job)
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, _interrupt)
        embedded = settings.CELERY_EMBEDDED_BROKER
        workers = opts["workers"] if opts["workers"] is not None else (2 if embedded else 0)
        beat = opts["beat"] if opts["beat"] is not None else embedded
        self._step("database", lambda: call_command("migrate", interactive=False, verbosity=0) or "migrated")
        self._step("admin user", self._admin_user)
        children: list[subprocess.Popen] = []
        worker = None
        try:
            if workers:
                worker = EmbeddedWorker(concurrency=workers, name=f"serve-{os.getpid()}@%h")
                worker.start()
                self._step("workers", lambda: self._wait_for_worker(worker))
            else:
                self._say("workers", "none started here (--workers N to start some); the overview shows who consumes")
            if beat:
                children.append(self._spawn("beat", _beat_command()))
                self._say("scheduler", "celery beat running (recrawl ticks, reaper, job ends)")
            web = self._spawn("web", self._web_command(opts))
            children.append(web)
            url = f"http://{opts['host']}:{opts['port']}/"
            self._step("web", lambda: self._wait_for_web(url, web))
            self.stdout.write(self.style.SUCCESS(f"console ready: {url} (admin: {url}admin/); Ctrl-C stops it all"))
            self.stdout.flush()
            self._supervise(web, children, worker)
        except KeyboardInterrupt:
            self.stderr.write("stopping")
        finally:
            for child in children:
                _stop(child)
            if worker:
                worker.stop()

    def _say(self, what: str, text: str) -> None:
        self.stderr.write(f"[{what:9s}] {text}")
        self.stderr.flush()

    def _step(self, what: str, action) -> None:
        self._say(what, "...")
        self._say(what, action() or "ok")

    def _admin_user(self) -> str:
        """A superuser named admin when there is none: the password from CRAWLHUB_ADMIN_PASSWORD, or a
        random one shown once and kept in admin_password_file() (readable by this user only)."""
        users = get_user_model()
        if users.objects.filter(is_superuser=True).exists():
            return "an admin user exists"
        password = os.environ.get("CRAWLHUB_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        users.objects.create_superuser("admin", "", password)
        if os.environ.get("CRAWLHUB_ADMIN_PASSWORD"):
            return "created user admin (password from CRAWLHUB_ADMIN_PASSWORD)"
        path = admin_password_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(password + "\n")
        path.chmod(0o600)
        return f"created user admin with password {password} (also in {path}); change it in the admin"

    def _wait_for_worker(self, worker: EmbeddedWorker) -> str:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            alive = [w for w in workers_alive() if w.name.startswith(f"serve-{os.getpid()}@")]
            if alive:
                return f"{alive[0].name} consumes {', '.join(alive[0].queue_list())}"
            if not worker.alive():
                raise CommandError("the worker exited at start; see var/log/embedded-worker.log")
            time.sleep(0.5)
        raise CommandError(f"the worker did not report in {READY_TIMEOUT:.0f} s; see var/log/embedded-worker.log")

    def _web_command(self, opts) -> list[str]:
        return [sys.executable, "-m", "gunicorn", "-c", "python:crawlproject.gunicorn_conf", "crawlproject.wsgi",
                "--bind", f"{opts['host']}:{opts['port']}", "--workers", str(opts["web_workers"]),
                "--access-logfile", str(settings.VAR_DIR / "log" / "web-access.log")]  # fmt: skip

    def _spawn(self, name: str, command: list[str]) -> subprocess.Popen:
        log_dir = settings.VAR_DIR / "log"
        private_file(log_dir / "web-access.log")  # gunicorn appends to it: mode 0600 from the start
        with open(private_file(log_dir / f"serve-{name}.log"), "ab") as out:
            return subprocess.Popen(command, cwd=settings.BASE_DIR, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip

    def _wait_for_web(self, url: str, web: subprocess.Popen) -> str:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if web.poll() is not None:
                raise CommandError(f"the web server exited ({web.returncode}); see var/log/serve-web.log")
            try:
                with urllib.request.urlopen(url + "admin/login/", timeout=2) as answer:
                    if answer.status == 200:
                        return f"listening on {url}"
            except (urllib.error.URLError, OSError):
                time.sleep(0.3)
        raise CommandError(f"the web server did not answer in {READY_TIMEOUT:.0f} s; see var/log/serve-web.log")

    def _supervise(self, web, children, worker) -> None:
        """Until Ctrl-C or SIGTERM: restart a worker or a beat that died, and say so; stop everything
        if the web server did."""
        restarted = float("-inf")
        while True:
            if web.poll() is not None:
                raise CommandError(f"the web server exited ({web.returncode}); see var/log/serve-web.log")
            if worker:
                worker.keep_alive()
            for i, child in enumerate(children):
                if child is web or child.poll() is None:
                    continue
                if time.monotonic() - restarted < BEAT_RESTART_SECONDS:  # the restart died at once: it won't help
                    raise CommandError(f"celery beat exited ({child.returncode}) again; see var/log/serve-beat.log")
                self._say(
                    "scheduler", f"celery beat exited ({child.returncode}); restarting it (var/log/serve-beat.log)"
                )
                children[i], restarted = self._spawn("beat", _beat_command()), time.monotonic()
            time.sleep(1)


def console_base_url_default(host: str, port: int) -> str:
    """The address alert links point at: CONSOLE_BASE_URL when set, else this server's own
    (--host, --port), set in the environment the workers, beat and web server start with."""
    if not os.environ.get("CONSOLE_BASE_URL"):
        shown = "localhost" if host in ("127.0.0.1", "0.0.0.0", "::", "") else host
        os.environ["CONSOLE_BASE_URL"] = f"http://{shown}:{port}"
        settings.CONSOLE_BASE_URL = os.environ["CONSOLE_BASE_URL"]
    return os.environ["CONSOLE_BASE_URL"]


def _console_address_publish(host: str, port: int) -> None:
    """The console's address in PORT and HOST for every process started from here (the web server,
    the workers, beat), so that no crawl, Try a URL or HTTP sink of theirs reaches the console, and
    refused in this process too."""
    os.environ["PORT"], os.environ["HOST"] = str(port), host
    refuse_services(own_services(settings))


def _beat_command() -> list[str]:
    schedule = str(settings.VAR_DIR / "celerybeat-schedule")
    return [sys.executable, "-m", "celery", "-A", "crawlproject", "beat", "-l", "WARNING", "-s", schedule]


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _stop(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def admin_password_file() -> Path:
    """Where the first admin's password is kept: var/admin-password for the embedded SQLite
    database, one file per database otherwise, so a checkout that moves to PostgreSQL keeps the
    embedded admin's password."""
    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return settings.VAR_DIR / "admin-password"
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{db.get('HOST') or 'local'}-{db['NAME']}")
    return settings.VAR_DIR / f"admin-password-{name}"
