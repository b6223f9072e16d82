"""What a spider's handler logs while it parses one page, captured to be kept with the page (and
its traceback when it fails). Pure: the standard logging module, no Django."""

import logging
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

MAX_LOG_LINES = 50  # a handler's last lines are kept with its page
MAX_LOG_CHARS = 2000
MAX_TRACEBACK_CHARS = 8000


@dataclass(frozen=True)
class LogLine:
    at: datetime
    level: str  # INFO, WARNING, ERROR...
    message: str


class LogCapture(logging.Handler):
    """The last MAX_LOG_LINES records of one thread (the handler's: a process may run others)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.thread = threading.get_ident()
        self.lines: deque[LogLine] = deque(maxlen=MAX_LOG_LINES)
        self._last: logging.LogRecord | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self.thread or record is self._last:  # the same record, from a parent logger
            return
        self._last = record
        message = record.getMessage()
        if record.exc_info:
            message += "\n" + logging.Formatter().formatException(record.exc_info)
        self.add(record.levelname, message[:MAX_LOG_CHARS], datetime.fromtimestamp(record.created, UTC))

    def add(self, level: str, message: str, at: datetime | None = None) -> None:
        self.lines.append(LogLine(at or datetime.now(UTC), level, message))

    def add_traceback(self, text: str) -> None:
        """The traceback's end: where it was raised, and why."""
        self.add("ERROR", text if len(text) <= MAX_TRACEBACK_CHARS else "..." + text[-MAX_TRACEBACK_CHARS:])


@contextmanager
def handler_log_captured(modules: list[str]) -> Iterator[LogCapture]:
    """Capture what this thread logs through the loggers of these modules (a spider's) while the
    block runs. Their INFO lines count: a logger left at the root's WARNING is set to INFO."""
    loggers = [logging.getLogger(module) for module in modules]
    capture = LogCapture()
    for logger in loggers:
        if logger.level == logging.NOTSET and logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        logger.addHandler(capture)
    try:
        yield capture
    finally:
        for logger in loggers:
            logger.removeHandler(capture)
