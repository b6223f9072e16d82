"""Progress of a command's long work on stderr: a rich bar on a terminal, a plain line every few
seconds otherwise (logs and pipes), so stdout stays free for data and the summary."""

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

LINE_EVERY_SECONDS = 5.0


@contextmanager
def progress(label: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """Yields advance(n=1); call it as work items finish."""
    if sys.stderr.isatty():
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task(label, total=total)
            yield lambda n=1: bar.advance(task, n)
        return
    yield _Lines(label, total).advance


def tracked(items: Iterable, label: str, total: int | None) -> Iterator:
    """The items, unchanged, with progress shown as they are consumed."""
    with progress(label, total) as advance:
        for item in items:
            yield item
            advance(1)


class _Lines:
    def __init__(self, label: str, total: int | None):
        self.label, self.total, self.done = label, total, 0
        self.last = time.monotonic()

    def advance(self, n: int = 1) -> None:
        self.done += n
        if time.monotonic() - self.last >= LINE_EVERY_SECONDS:
            self.last = time.monotonic()
            of_total = f"/{self.total}" if self.total is not None else ""
            sys.stderr.write(f"{self.label}: {self.done}{of_total}\n")
            sys.stderr.flush()
