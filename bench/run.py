"""One bench run: site, server, scratch state, workers, the crawl itself under the sampler, then figures."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

from bench import REPO, BenchError, procs
from bench.check import access_log_report, pages_report, truth_host
from bench.machine import redis_commands, redis_info, speed_probe
from bench.report import result_build
from bench.sampler import Role, Sampler
from bench.scratch import Scratch, scratch_distributed, scratch_embedded, scratch_prepare
from bench.scratchdb import ScratchDB
from bench.serving import RunningServer, site_serve
from bench.sitefiles import site_ensure
from bench.workers import WorkerPool

PROJECT = "bench"
KILL_GRACE_SECONDS = 120
SHAPES_KEPT = 40  # the workers' most frequent statement shapes kept in the figures


@dataclass
class BenchOptions:
    pages: int = 10_000
    seed: int = 20240601
    mode: str = "embedded"
    layout: str = "one"
    concurrency: int = 2
    media: bool = False
    site: Path | None = None
    base_url: str | None = None
    access_log: Path | None = None
    port: int = 18090
    timeout: float = 3600.0
    requests: int = 32  # in flight to the site at once, all workers (max_per_host; each batch its share)


def bench_run(options: BenchOptions, *, say: Callable[[str], None] = print) -> dict:
    run = BenchRun(options, say)
    try:
        return run.execute()
    finally:
        run.cleanup()


class BenchRun:
    def __init__(self, options: BenchOptions, say: Callable[[str], None]):
        self.o, self.say = options, say
        self.var = Path(settings.VAR_DIR)
        self.server = self.workers = self.db = self.crawl = self.sampler = None
        self.own_backends: set[int] = set()
        self._sampler_backend_known = False

    def execute(self) -> dict:
        scratch = self._scratch()  # first: it refuses a wrong configuration before any long work
        site_dir, truth = self._site()
        self.server = self._serve(site_dir, truth)
        self.say(f"scratch state in {scratch.dir} (migrating its database) ...")
        scratch_prepare(scratch)
        self.db = ScratchDB(scratch.db)
        if scratch.mode == "distributed":
            self.say(f"starting the workers (layout {self.o.layout}) ...")
            self._start_workers(scratch)
        self.speed = [speed_probe()]
        self.sampler = Sampler(self._roles(scratch), discovered=self._discovered, on_exit=self.db.close)
        commands_before = redis_commands(scratch.broker_url) if scratch.broker_url else None
        self.sampler.start()
        self.say(f"crawling {self.server.base_url} ({scratch.mode}) ...")
        summary, seconds, final = self._crawl_run(scratch)
        self.sampler.finish()
        self.speed.append(speed_probe())
        commands = redis_commands(scratch.broker_url) - commands_before - 1 if scratch.broker_url else None
        self.say(f"crawl done in {seconds:.1f} s; stopping, checking ...")
        if self.workers:
            self.workers.stop()  # before reading the statement counts: pool processes write theirs as they stop
        return self._figures(site_dir, truth, scratch, summary, seconds, final, commands)

    def _figures(self, site_dir, truth, scratch, summary, seconds, final, commands) -> dict:
        lines = self.server.log_lines()
        return result_build(
            options=self.o,
            site_dir=site_dir,
            truth=truth,
            server=self.server,
            crawl=summary,
            seconds=seconds,
            cpu=self._cpu(self.sampler, final, scratch.mode),
            sampler=self.sampler,
            statements=_statements(scratch, self.crawl.pid),
            redis_commands=commands,
            pages=pages_report(truth, self.db.fetched_final_urls()),
            served=access_log_report(truth, lines) if lines is not None else None,
            scratch=scratch,
            postgres_version=self._postgres_version(scratch),
            speed_probe_s=self.speed,
        )

    def _site(self) -> tuple[Path, dict]:
        if self.o.site:
            site_dir = Path(self.o.site)
        else:
            base = f"http://127.0.0.1:{self.o.port}"
            site_dir, reused = site_ensure(n=self.o.pages, seed=self.o.seed, base_url=base, parent=self.var / "bench")
            self.say(f"site {site_dir} ({'reused' if reused else 'generated'})")
        try:
            truth = json.loads((site_dir / "ground_truth.json").read_text())
        except (OSError, ValueError) as exc:
            raise BenchError(f"{site_dir} has no readable ground_truth.json: {exc}") from None
        return site_dir, truth

    def _serve(self, site_dir: Path, truth: dict):
        if self.o.base_url:
            if urlsplit(self.o.base_url).netloc.lower() != truth_host(truth):
                self.say(f"warning: {self.o.base_url} is not the ground truth's {truth['params']['base_url']}")
            server = RunningServer(self.o.base_url, self.o.access_log)
            if not server.answers():
                raise BenchError(f"nothing answers at {self.o.base_url}: start that server first")
            return server
        port = urlsplit(truth["params"]["base_url"]).port or 80
        server = site_serve(
            web_root=site_dir / "site",
            redirects=site_dir / "redirects.map",
            port=port,
            scratch=self.var / "bench" / "server",
        )
        self.say(f"serving {site_dir / 'site'} with {server.kind} on {server.base_url}")
        return server

    def _scratch(self) -> Scratch:
        if self.o.mode == "embedded":
            return scratch_embedded(self.var)
        if self.o.mode != "distributed":
            raise BenchError(f"mode must be embedded or distributed, not {self.o.mode!r}")
        return scratch_distributed(
            self.var, database=settings.DATABASES["default"], broker_url=settings.CELERY_BROKER_URL
        )

    def _start_workers(self, scratch: Scratch) -> None:
        from crawlproject.celery import app  # the configured broker: the one the workers use

        WorkerPool.refuse_others(app)
        self.workers = WorkerPool(
            layout=self.o.layout, concurrency=self.o.concurrency, env=scratch.counted_env(), log_dir=scratch.dir
        )
        self.workers.start()
        self.workers.wait_ready(app)

    def _discovered(self) -> int:
        """Called from the sampler's thread, which has its own connection (and PostgreSQL backend)."""
        if not self._sampler_backend_known:
            self.own_backends.add(self.db.backend_pid())  # the bench's reads are not the crawler's work
            self._sampler_backend_known = True
        return self.db.discovered()

    def _roles(self, scratch: Scratch) -> list[Role]:
        crawl_pid = lambda: {self.crawl.pid} if self.crawl else set()  # noqa: E731
        if scratch.mode == "embedded":
            workers = lambda t: procs.descendants(t, crawl_pid()) - crawl_pid()  # noqa: E731
        else:
            workers = lambda t: procs.descendants(t, self.workers.roots())  # noqa: E731
        roles = [Role("crawl_command", lambda t: crawl_pid()), Role("workers", workers)]
        if scratch.mode == "distributed":
            roles += self._service_roles(scratch)
        server_roots = self.server.roots()
        roles.append(Role("server", lambda t: procs.descendants(t, server_roots)))
        return roles

    def _service_roles(self, scratch: Scratch) -> list[Role]:
        roles = []
        redis_pid = int(redis_info(scratch.broker_url, "server").get("process_id", 0))
        if procs.comm(redis_pid).startswith("redis"):  # a Redis on another machine has no /proc here
            roles.append(Role("redis", lambda t: {redis_pid}))
        backend = self.db.backend_pid()
        self.own_backends.add(backend)
        own = procs.proc_read(backend)
        if own and procs.comm(own.ppid).startswith(("postgres", "postmaster")):
            # The whole server, reaped backends included: Celery's workers may open and close a
            # connection per task, and a backend that lives less than a sampling interval would be
            # missed if only the scratch database's live backends were followed. The bench's own
            # reads are taken off afterwards (role "bench_reads").
            postmaster = own.ppid
            roles.append(Role("postgres", lambda t: procs.descendants(t, {postmaster})))
            roles.append(Role("bench_reads", lambda t: self.own_backends & t.keys(), accounting="seen"))
        return roles

    def _crawl_run(self, scratch: Scratch) -> tuple[dict | None, float, procs.Proc | None]:
        """Runs `manage.py crawl`; returns its summary, wall seconds and its final /proc reading (as a zombie)."""
        command = [sys.executable, "manage.py", "crawl", self.server.base_url, "--project", PROJECT]
        command += ["--allow-private", "--json", "--timeout", str(self.o.timeout)]
        command += ["--workers", str(self.o.concurrency if scratch.mode == "embedded" else 0)]
        per_batch = max(1, self.o.requests // self.o.concurrency)  # each pool process fetches one batch at a time
        command += ["--concurrency", str(per_batch), "--max-per-host", str(self.o.requests)]
        if not self.o.media:
            command.append("--no-media")
        out, err = scratch.dir / "crawl.out", scratch.dir / "crawl.log"
        started = time.monotonic()
        # The site is one host: the crawl's new project gets a per-host cap (a default project has
        # one) that is large enough for the whole site, so a 100,000-page run still crawls it all.
        default_cap = settings.CRAWL_DEFAULT_MAX_PAGES_PER_HOST
        per_host = max(default_cap, 2 * self.o.pages) if default_cap else 0
        env = scratch.counted_env() | {"CRAWL_DEFAULT_MAX_PAGES_PER_HOST": str(per_host)}
        with open(out, "wb") as stdout, open(err, "wb") as stderr:
            self.crawl = subprocess.Popen(
                command, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr
            )
        final = self._wait_exit(self.crawl, started + self.o.timeout + KILL_GRACE_SECONDS)
        seconds = time.monotonic() - started
        if self.crawl.wait() != 0:
            raise BenchError(f"the crawl failed ({self.crawl.returncode}): {err.read_text(errors='replace')[-1500:]}")
        lines = out.read_text().strip().splitlines()
        return (json.loads(lines[-1]) if lines else None), seconds, final

    def _wait_exit(self, process: subprocess.Popen, deadline: float) -> procs.Proc | None:
        """Waits for the exit without reaping, so /proc still holds the process's final CPU figures."""
        while os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
            if time.monotonic() > deadline:
                process.send_signal(signal.SIGINT)  # the crawl stops its embedded worker on the way out
                deadline = time.monotonic() + 60
            time.sleep(0.1)
        return procs.proc_read(process.pid)

    def _cpu(self, sampler: Sampler, final: procs.Proc | None, mode: str) -> dict[str, float]:
        cpu = {name: sampler.cpu_seconds(name) for name in sampler.roles}
        if "bench_reads" in cpu:
            cpu["postgres"] -= cpu.pop("bench_reads")
        if final and mode == "embedded":  # exact: its own CPU, and all it reaped (its worker and pool)
            cpu["crawl_command"], cpu["workers"] = final.own / procs.HZ, final.reaped / procs.HZ
        elif final:
            cpu["crawl_command"] = (final.own + final.reaped) / procs.HZ
        return cpu

    def _postgres_version(self, scratch: Scratch) -> str | None:
        if scratch.mode != "distributed":
            return None
        from django.db import connections

        from bench.scratchdb import ALIAS

        with connections[ALIAS].cursor() as cursor:
            cursor.execute("SHOW server_version")
            return cursor.fetchone()[0]

    def cleanup(self) -> None:
        if self.sampler:
            self.sampler.stop()
        if self.crawl and self.crawl.poll() is None:
            self.crawl.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.crawl.wait(60)
            self.crawl.kill()
            self.crawl.wait()
        if self.workers:
            self.workers.stop()
        if self.server:
            self.server.stop()
        if self.db:
            self.db.close()


def _statements(scratch: Scratch, crawl_pid: int) -> dict:
    """Statements counted by crawlproject/sqlcount.py: the crawl command's, and everyone else's (the workers)."""
    counts, shapes = {"crawl_command": 0, "workers": 0, "processes": 0}, Counter()
    for path in scratch.sql_count_dir.glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(path.read_text())
            counts["crawl_command" if record["pid"] == crawl_pid else "workers"] += record["statements"]
            counts["processes"] += 1
            if record["pid"] != crawl_pid:
                shapes.update(record.get("shapes", {}))
    return counts | {"shapes": dict(shapes.most_common(SHAPES_KEPT))}
