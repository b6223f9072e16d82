"""The sink kinds. Each writer gets a batch of records (dicts, each with its stable "key") and the
batch's name, and must make a redelivery harmless: record-shaped sinks (files, Redis, your own
class) recognise a record by its key; batch-shaped ones (tar, JSON Lines) write one object per
batch, named after it, so a redelivered batch replaces its own object.

Config (Sink.config) per kind, with the placeholders {project}, {sink}, {type} (item, page,
asset), {kind} (the item's kind) and {key} where a scheme is taken:
- file:   {"directory": "shop", "name": "{type}/{key}.json"}   under CRAWL_SINK_ROOT
- redis:  {"url": "redis://host:6379/0", "key": "crawlhub:{project}:{type}", "type": "list" | "hash"}
- tar:    {"directory": "shop", "compression": "" | "gz" | "bz2"}  one archive per batch
- jsonl:  {"prefix": "sinks/{project}/{sink}/"}  one object per batch on the media storage
- python: {"class": "package.module.Class", "options": {...}}  Class(sink=..., **options).deliver(records, batch=)
- http:   {"url": "https://receiver/hook", "secret": "...", "timeout": 30}  one signed POST per batch (http.py)
"""

import contextlib
import importlib
import io
import json
import os
import re
import tarfile
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
PLACEHOLDERS = ("project", "sink", "type", "kind", "key")
DEFAULT_FILE_NAME = "{type}/{key}.json"
DEFAULT_REDIS_KEY = "crawlhub:{project}:{sink}:{type}"
DEFAULT_PREFIX = "sinks/{project}/{sink}/"
COMPRESSIONS = {"": "", "gz": ".gz", "bz2": ".bz2"}


def _safe(value: str) -> str:
    return _UNSAFE.sub("_", str(value)).strip("._") or "_"


def fill(scheme: str, sink, record: dict | None = None) -> str:
    """A scheme with its placeholders replaced by file-name-safe values."""
    values = {"project": sink.project.slug, "sink": sink.name}
    if record is not None:
        values |= {"type": record["type"], "kind": record.get("kind", record["type"]), "key": record["key"]}
    try:
        return scheme.format(**{k: _safe(v) for k, v in values.items()})
    except (KeyError, IndexError, ValueError) as exc:
        raise ValidationError(f"scheme {scheme!r}: placeholders are {', '.join(PLACEHOLDERS)} ({exc})") from None


def _dumps(record: dict) -> bytes:
    return json.dumps(record, ensure_ascii=False, sort_keys=True).encode()


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _within_root(directory: str, sink) -> Path:
    root = Path(settings.CRAWL_SINK_ROOT).resolve()
    path = (root / fill(directory or "{project}/{sink}", sink)).resolve()
    if path != root and root not in path.parents:
        raise ValidationError(f"directory {directory!r} leaves CRAWL_SINK_ROOT ({root})")
    return path


class FileSink:
    """One file per record, named by the scheme: a redelivered record replaces its own file."""

    def __init__(self, sink):
        self.sink, self.directory = sink, _within_root(sink.config.get("directory", ""), sink)
        self.name = sink.config.get("name", DEFAULT_FILE_NAME)

    def deliver(self, records: list[dict], *, batch: str) -> None:
        for record in records:
            path = (self.directory / fill(self.name, self.sink, record)).resolve()
            if self.directory not in path.parents:
                raise ValueError(f"file name {path} leaves the sink's directory")
            _atomic_write(path, _dumps(record))


# KEYS[1] list, KEYS[2] set of keys already pushed; ARGV[1] record key, ARGV[2] value.
_PUSH_ONCE = """
if redis.call('SADD', KEYS[2], ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[1], ARGV[2])
  return 1
end
return 0
"""


class RedisSink:
    """A list (each record pushed once: a companion set `<key>:keys` remembers the keys pushed) or a
    hash (field = record key, so a redelivery overwrites itself)."""

    def __init__(self, sink):
        import redis

        self.sink = sink
        self.client = redis.Redis.from_url(sink.config["url"], socket_timeout=10, socket_connect_timeout=5)
        self.key = sink.config.get("key", DEFAULT_REDIS_KEY)
        self.hash = sink.config.get("type", "list") == "hash"

    def deliver(self, records: list[dict], *, batch: str) -> None:
        push = None if self.hash else self.client.register_script(_PUSH_ONCE)
        with self.client.pipeline(transaction=True) as pipe:
            for record in records:
                name = fill(self.key, self.sink, record)
                if self.hash:
                    pipe.hset(name, record["key"], _dumps(record))
                else:
                    push(keys=[name, f"{name}:keys"], args=[record["key"], _dumps(record)], client=pipe)
            pipe.execute()
        self.client.close()


class TarSink:
    """One archive per batch (`<project>-<sink>-<batch>.tar[.gz|.bz2]`), members `<type>/<key>.json`,
    written to a temporary name and renamed: rolling archives, each complete or absent."""

    def __init__(self, sink):
        self.sink, self.directory = sink, _within_root(sink.config.get("directory", ""), sink)
        self.compression = sink.config.get("compression", "gz")

    def deliver(self, records: list[dict], *, batch: str) -> None:
        name = f"{_safe(self.sink.project.slug)}-{_safe(self.sink.name)}-{batch}.tar{COMPRESSIONS[self.compression]}"
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode=f"w:{self.compression}") as tar:
            for record in records:
                data = _dumps(record)
                member = tarfile.TarInfo(f"{record['type']}/{_safe(record['key'])}.json")
                member.size = len(data)
                tar.addfile(member, io.BytesIO(data))
        _atomic_write(self.directory / name, buffer.getvalue())


class JsonLinesSink:
    """One JSON Lines object per batch on the media storage (disk or S3): `<prefix><batch>.jsonl`."""

    def __init__(self, sink):
        self.sink, self.prefix = sink, fill(sink.config.get("prefix", DEFAULT_PREFIX), sink)

    def deliver(self, records: list[dict], *, batch: str) -> None:
        from core.storage import store_object

        with tempfile.NamedTemporaryFile(suffix=".jsonl") as out:
            out.write(b"\n".join(_dumps(r) for r in records) + b"\n")
            out.flush()
            store_object(f"{self.prefix}{batch}.jsonl", out.name)


class PythonSink:
    """Your own class: `Class(sink=sink, **options)`, then `.deliver(records, batch=...)` per batch.
    It must be idempotent by record key (a batch may come again after a crash)."""

    def __init__(self, sink):
        module, _, name = sink.config["class"].rpartition(".")
        self.target = getattr(importlib.import_module(module), name)(sink=sink, **sink.config.get("options", {}))

    def deliver(self, records: list[dict], *, batch: str) -> None:
        self.target.deliver(records, batch=batch)


def _http_sink(sink):
    from sinks.webhooks import HttpSink  # httpx and the egress gate, loaded only by a process that posts

    return HttpSink(sink)


WRITERS = {
    "file": FileSink,
    "redis": RedisSink,
    "tar": TarSink,
    "jsonl": JsonLinesSink,
    "python": PythonSink,
    "http": _http_sink,
}


def writer_for(sink):
    return WRITERS[sink.kind](sink)


def sink_check(sink) -> None:
    """Refuse a configuration that cannot work, with what to change (the admin, the API and the
    commands all call it through Sink.clean)."""
    config = sink.config if isinstance(sink.config, dict) else None
    if config is None:
        raise ValidationError({"config": "a JSON object"})
    allowed = {
        "file": {"directory", "name"},
        "redis": {"url", "key", "type"},
        "tar": {"directory", "compression"},
        "jsonl": {"prefix"},
        "python": {"class", "options"},
        "http": {"url", "secret", "timeout"},
    }.get(sink.kind)
    if allowed is None:
        raise ValidationError({"kind": f"one of {', '.join(WRITERS)}"})
    unknown = sorted(set(config) - allowed)
    if unknown:
        raise ValidationError({"config": f"unknown keys for a {sink.kind} sink: {', '.join(unknown)}"})
    try:
        _check_kind(sink, config)
    except ValidationError as exc:
        raise ValidationError({"config": exc.messages}) from None


def _check_kind(sink, config: dict) -> None:
    record = {"type": "item", "kind": "rule:x", "key": "k"}
    if sink.kind in ("file", "tar") and sink.project_id:
        _within_root(config.get("directory", ""), sink)
    if sink.kind == "file" and sink.project_id:
        fill(config.get("name", DEFAULT_FILE_NAME), sink, record)
    if sink.kind == "tar" and config.get("compression", "gz") not in COMPRESSIONS:
        raise ValidationError("compression: '', 'gz' or 'bz2'")
    if sink.kind == "redis":
        if not str(config.get("url", "")).startswith(("redis://", "rediss://", "unix://")):
            raise ValidationError("url: a redis:// URL")
        if config.get("type", "list") not in ("list", "hash"):
            raise ValidationError("type: list or hash")
    if sink.kind == "http":
        from sinks.webhooks import http_check

        http_check(config)
    if sink.kind == "python":
        path = str(config.get("class", ""))
        module, _, name = path.rpartition(".")
        try:
            target = getattr(importlib.import_module(module), name) if module else None
        except (ImportError, AttributeError, ValueError):
            target = None
        if target is None or not hasattr(target, "deliver"):
            raise ValidationError(f"class: {path!r} is not an importable class with a deliver() method")
        if not isinstance(config.get("options", {}), dict):
            raise ValidationError("options: a JSON object")
