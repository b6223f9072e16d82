"""The throughput benchmark: a deterministic local site, a server for it, a checker, and the measuring run."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class BenchError(RuntimeError):
    """A run cannot go on: the message says why and what to do."""
