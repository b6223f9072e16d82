"""Log format: plain text lines by default; with CRAWLHUB_LOG_FORMAT=json every line of every logger
(crawlhub's, Django's, Celery's) is one JSON object rendered by structlog's ProcessorFormatter.

Context rides on structlog.contextvars: inside a Celery task each line carries task_id, task and
batch_size (bound by the task_prerun signal, cleared by task_postrun), and services bind their
project_id. Imported by the settings, so nothing here may touch Django's app registry.
"""

import logging

import structlog
from celery import signals

PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
LOG_FORMATS = ("plain", "json")
# Libraries whose INFO lines write whole URLs (a webhook's password, path and query: secrets the
# one masking rule hides everywhere else, core/masking.py): only their warnings are logged.
QUIET_LOGGERS = {name: {"level": "WARNING", "propagate": True} for name in ("httpx", "httpcore")}


def _pre_chain() -> list:
    """What every record gets before rendering: the bound context, logger, level, extras, time."""
    return [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def logging_config(*, log_format: str, root_level: str, crawlhub_level: str) -> dict:
    """The settings' LOGGING (dictConfig): one console handler on the root logger."""
    json_formatter = {
        "()": structlog.stdlib.ProcessorFormatter,
        "foreign_pre_chain": _pre_chain(),
        "processors": [
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
    }
    formatter = json_formatter if log_format == "json" else {"format": PLAIN_FORMAT}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {log_format: formatter},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": log_format}},
        "root": {"handlers": ["console"], "level": root_level},
        "loggers": {"crawlhub": {"level": crawlhub_level, "propagate": True}, **QUIET_LOGGERS},
    }


def gunicorn_logconfig(*, log_format: str) -> dict:
    """gunicorn's logconfig_dict: in json, its error and access lines go through the same root handler
    as everything else; empty (gunicorn's own text format) otherwise."""
    if log_format != "json":
        return {}
    config = logging_config(log_format="json", root_level="INFO", crawlhub_level="INFO")
    gunicorn = {"level": "INFO", "handlers": [], "propagate": True}
    config["loggers"] |= {"gunicorn.error": gunicorn, "gunicorn.access": gunicorn}
    return config


def structlog_configure(*, log_format: str) -> None:
    """Loggers from structlog.get_logger() go through the standard library's handlers too; in json,
    Python warnings become log records (py.warnings) instead of bare text on stderr."""
    last = structlog.stdlib.ProcessorFormatter.wrap_for_formatter
    if log_format == "json":
        logging.captureWarnings(True)
    else:
        last = structlog.processors.KeyValueRenderer(key_order=["event"])
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.filter_by_level,
            structlog.stdlib.PositionalArgumentsFormatter(),
            last,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def bind_task_context(task_id=None, task=None, args=None, kwargs=None, **_) -> None:
    from crawlproject.jobcontext import CURRENT_JOB

    structlog.contextvars.clear_contextvars()
    ids = args[0] if args and isinstance(args[0], list) else []
    job = (kwargs or {}).get("job")
    context = {"task_id": task_id, "task": getattr(task, "name", None), "batch_size": len(ids)}
    structlog.contextvars.bind_contextvars(**context, **({"job": job} if job is not None else {}))
    CURRENT_JOB.set(job)


def clear_task_context(**_) -> None:
    from crawlproject.jobcontext import CURRENT_JOB

    structlog.contextvars.clear_contextvars()
    CURRENT_JOB.set(None)


def task_context_connect() -> None:
    """Bind each Celery task's id and name to the log context while it runs (called once, from ready())."""
    signals.task_prerun.connect(bind_task_context, dispatch_uid="crawlhub.log.bind", weak=False)
    signals.task_postrun.connect(clear_task_context, dispatch_uid="crawlhub.log.clear", weak=False)
