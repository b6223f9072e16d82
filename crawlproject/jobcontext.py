"""The console's job on whose behalf work runs now: it labels log lines and rides on the messages a
task publishes. The pipeline reads it; only the console and the task hooks set it."""

from contextlib import contextmanager
from contextvars import ContextVar

# The job on whose behalf messages are published now: set by the console around the actions it
# starts, and inside a task from its message's `job` argument, so the messages a task publishes carry
# its job on (shown in Flower's arguments). Informational: a row's job is stamped from its project
# when claimed.
CURRENT_JOB: ContextVar[int | None] = ContextVar("crawlhub_job", default=None)


@contextmanager
def job_scope(job_id: int | None):
    token = CURRENT_JOB.set(job_id)
    try:
        yield
    finally:
        CURRENT_JOB.reset(token)
