"""SQL statements per process, for the benchmark (bench/): on only when CRAWLHUB_SQL_COUNT_DIR is set.

Every new database connection gets an execute wrapper that counts statements (an executemany is
one; a savepoint is one; the driver's own BEGIN/COMMIT are not seen). Each process writes
`<dir>/<pid>.json` ({"pid", "argv", "statements", "shapes"}) at most once a second, at exit, and
when a Celery pool process shuts down (pool processes leave with os._exit, so atexit never runs
there). "shapes" counts the statements by their text with the literals taken out (sql_shape), so a
run can say which statements a page costs (`manage.py bench --shapes`).
"""

import atexit
import json
import os
import re
import sys
import time
from collections import Counter
from functools import lru_cache
from pathlib import Path

ENV = "CRAWLHUB_SQL_COUNT_DIR"
WRITE_EVERY_SECONDS = 1.0
SHAPE_CHARS = 160
_LITERALS = re.compile(r"'(?:[^']|'')*'|\b\d+(?:\.\d+)?\b|%s")
_LISTS = re.compile(r"\((?:\s*\?\s*,)+\s*\?\s*\)")


@lru_cache(maxsize=4096)
def sql_shape(sql: str) -> str:
    """The statement with its literals and parameters as `?` and lists of them as `(?...)`, cut short:
    statements that differ only in their values have one shape."""
    shape = _LISTS.sub("(?...)", _LITERALS.sub("?", sql))
    return " ".join(shape.split())[:SHAPE_CHARS]


class StatementCounter:
    def __init__(self, directory: Path):
        self.directory = directory
        self.pid, self.statements, self.written_at = os.getpid(), 0, 0.0
        self.shapes: Counter = Counter()  # by shape, up to the last write
        self.texts: Counter = Counter()  # by text, since the last write

    def __call__(self, execute, sql, params, many, context):
        self._own_process()
        self.statements += 1
        self.texts[sql] += 1  # shaped when written, each text once: counting stays cheap on the hot path
        try:
            return execute(sql, params, many, context)
        finally:
            if time.monotonic() - self.written_at >= WRITE_EVERY_SECONDS:
                self.write()

    def _own_process(self) -> None:
        if os.getpid() != self.pid:  # a forked pool process starts its own count, not its parent's
            self.pid, self.statements, self.written_at = os.getpid(), 0, 0.0
            self.shapes, self.texts = Counter(), Counter()

    def write(self, **_signal_kwargs) -> None:
        self._own_process()
        self.written_at = time.monotonic()
        path = self.directory / f"{self.pid}.json"
        part = path.with_suffix(".part")
        try:
            for sql, count in self.texts.items():
                self.shapes[sql_shape(sql)] += count
            self.texts.clear()
            record = {"pid": self.pid, "argv": sys.argv, "statements": self.statements, "shapes": self.shapes}
            part.write_text(json.dumps(record))
            part.replace(path)  # readers never see half a file
        except OSError:
            pass  # counting must never break the process it counts


def sqlcount_install() -> None:
    """Count this process's statements when CRAWLHUB_SQL_COUNT_DIR is set; otherwise do nothing."""
    directory = os.environ.get(ENV)
    if not directory:
        return
    from celery.signals import worker_process_shutdown
    from django.db.backends.signals import connection_created

    Path(directory).mkdir(parents=True, exist_ok=True)
    counter = StatementCounter(Path(directory))

    def on_connection(sender, connection, **kwargs) -> None:
        if counter not in connection.execute_wrappers:  # a reconnect reuses the wrapper object
            connection.execute_wrappers.append(counter)

    connection_created.connect(on_connection, weak=False, dispatch_uid="crawlhub-sqlcount")
    worker_process_shutdown.connect(counter.write, weak=False, dispatch_uid="crawlhub-sqlcount")
    atexit.register(counter.write)
