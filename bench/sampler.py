"""Samples the processes of each role every ~0.5 s while a crawl runs: CPU, peak RSS, and every ~1 s
the workers' RSS beside the number of URLs discovered so far."""

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bench import procs

MB = 1024 * 1024


@dataclass
class Role:
    """A group of processes. accounting "tree": own + reaped CPU of the live members, end minus start
    (exact for a tree that reaps its own children); "seen": own CPU of each member while it was seen
    (for a group picked out of a larger tree, e.g. one database's PostgreSQL backends)."""

    name: str
    pids: Callable[[dict], set[int]]
    accounting: str = "tree"
    peak_sum: int = 0
    peak_max: int = 0
    first: dict = field(default_factory=dict)
    last: dict = field(default_factory=dict)
    current: set = field(default_factory=set)  # members at the latest reading
    initial: set | None = None  # members at the baseline reading


class Sampler(threading.Thread):
    def __init__(
        self,
        roles: list[Role],
        *,
        discovered: Callable[[], int] | None = None,
        memory_role: str = "workers",
        interval: float = 0.5,
        on_exit: Callable[[], None] | None = None,
    ):
        super().__init__(name="bench-sampler", daemon=True)
        self.roles = {r.name: r for r in roles}
        self.discovered, self.memory_role, self.interval, self.on_exit = discovered, memory_role, interval, on_exit
        self.memory: list[dict] = []
        self.started_at = time.monotonic()
        self._stop_event = threading.Event()
        self.first_table = self.last_table = self._sample()  # the baseline, taken before the crawl starts

    def run(self) -> None:
        next_memory = 0.0
        try:
            while not self._stop_event.wait(self.interval):
                self.last_table = self._sample()
                if time.monotonic() >= next_memory:
                    started = time.monotonic()
                    self._memory_point(self.last_table)
                    # counting a large frontier is not free: keep it under ~5% of one core
                    next_memory = time.monotonic() + max(1.0, 20 * (time.monotonic() - started))
        finally:
            if self.on_exit:
                self.on_exit()

    def finish(self) -> None:
        """Stop sampling and take the final reading (with a last memory point)."""
        self._stop_event.set()
        self.join()
        self.last_table = self._sample()
        self._memory_point(self.last_table, discovered=False)

    def stop(self) -> None:
        """Stop sampling without a final reading (the run failed)."""
        self._stop_event.set()

    def _sample(self) -> dict:
        table = procs.proc_table()
        for role in self.roles.values():
            members = role.pids(table)
            rss = [table[p].rss for p in members if p in table]
            role.peak_sum, role.peak_max = max(role.peak_sum, sum(rss)), max(role.peak_max, max(rss, default=0))
            role.current = members
            if role.initial is None:
                role.initial = members
            for pid in members:
                if pid in table:
                    self._seen(role, table[pid])
        return table

    def _seen(self, role: Role, proc: procs.Proc) -> None:
        key = (proc.pid, proc.start)
        if key not in role.first:
            baseline = getattr(self, "first_table", None)
            role.first[key] = proc.own if baseline is None else 0  # born during the run: all of it counts
        role.last[key] = proc.own

    def _memory_point(self, table: dict, *, discovered: bool = True) -> None:
        role = self.roles.get(self.memory_role)
        if role is None:
            return
        count = None
        if discovered and self.discovered:
            with contextlib.suppress(Exception):  # a locked or restarting database only skips a point
                count = self.discovered()
        if count is None and self.memory:
            count = self.memory[-1]["discovered"]
        members = sorted(p for p in role.current if p in table)
        labels = {p: ("pool" if table[p].ppid in role.current else "main") for p in members}
        self.memory.append(
            {
                "seconds": round(time.monotonic() - self.started_at, 1),
                "discovered": count,
                "rss_mb": {f"{labels[p]} {p}": round(table[p].rss / MB, 1) for p in members},
            }
        )

    def cpu_seconds(self, name: str) -> float:
        role = self.roles[name]
        if role.accounting == "seen":
            ticks = sum(role.last[k] - role.first[k] for k in role.last)
        else:
            ticks = procs.tree_ticks(self.last_table, role.current)
            ticks -= procs.tree_ticks(self.first_table, role.initial or set())
        return ticks / procs.HZ

    def peak_rss_mb(self, name: str) -> dict:
        role = self.roles[name]
        return {"sum": round(role.peak_sum / MB, 1), "max_process": round(role.peak_max / MB, 1)}
