"""Delivery to sinks, at least once: records are offered inside the transaction that stores them
(the outbox), leased in batches, written, then marked done; a failing sink is retried with back-off
(CRAWL_SINK_MAX_ATTEMPTS, then failed and shown) and never holds back the crawl, whose stages only
insert outbox rows. A batch whose worker died comes back whole when its lease expires."""

import hashlib
import json
import logging
import os
import signal
import time
import uuid
from datetime import timedelta
from pathlib import Path

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from core.batchsql import insert_new
from core.masking import config_secrets, masked_secrets
from crawl.frontier.leases import lease_expired, lease_release, lease_take
from crawlproject.control_tasks import DELIVER

from .kinds import writer_for
from .models import Sink, SinkDelivery

log = logging.getLogger("crawlhub.sinks")
PENDING, LEASED = SinkDelivery.State.PENDING, SinkDelivery.State.LEASED
DONE, FAILED = SinkDelivery.State.DONE, SinkDelivery.State.FAILED
DELIVER_SECONDS = 40  # one task delivers batches of its sink for at most this long, then hands over


def record_key(*parts) -> str:
    """A stable key: the same record (same identity, same content) always gets the same one."""
    return ".".join(str(p) for p in parts)[:200]


def content_hash(value) -> str:
    return hashlib.sha1(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]


def sinks_active(project_id: int) -> list[dict]:
    """The project's active sinks and the record types each takes (none: nothing to build)."""
    return list(Sink.objects.filter(project_id=project_id, active=True).values("id", "items", "pages", "assets"))


def sinks_offer(project_id: int, records: list[dict], *, sinks: list[dict] | None = None) -> int:
    """Queue records (each with "key" and "type": item, page, asset or event) for the project's active sinks
    (`sinks`, read from sinks_active when not given) that take their type, in the caller's
    transaction; each sink is woken after the commit. A record a sink already has (same key) is not
    queued again. Returns rows queued."""
    if not records:
        return 0
    sinks = sinks_active(project_id) if sinks is None else sinks
    queued = 0
    for sink in sinks:
        wanted = {"item": sink["items"], "page": sink["pages"], "asset": sink["assets"], "event": True}
        rows = [SinkDelivery(sink_id=sink["id"], key=r["key"], record=r) for r in records if wanted[r["type"]]]
        new = insert_new(SinkDelivery, rows, conflict_fields=("sink", "key"))
        if new:
            queued += len(new)
            transaction.on_commit(lambda sink_id=sink["id"]: _publish(sink_id))
    return queued


def _publish(sink_id: int) -> None:
    """Wake the sink's delivery now. Retries carry no message: their time is in the rows
    (`next_at`), and beat's sinks tick wakes them when due."""
    current_app.send_task(DELIVER.name, args=[sink_id])


def sink_deliver(sink_id: int) -> int:
    """Deliver the sink's due records, a batch at a time, for up to DELIVER_SECONDS. Returns records
    delivered."""
    sink = Sink.objects.select_related("project").filter(id=sink_id).first()
    if sink is None or not sink.active:
        return 0
    delivered, started = 0, time.monotonic()
    while time.monotonic() - started < DELIVER_SECONDS:
        token, batch, rows = _claim(sink)
        if not rows:
            return delivered
        try:
            writer_for(sink).deliver([r.record for r in rows], batch=batch)
        except Exception as exc:
            _failed(sink, token, rows, exc)
            return delivered
        _fault_after_write(sink)
        delivered += lease_release(SinkDelivery.objects.filter(lease_token=token, state=LEASED), state=DONE, error="")
        Sink.objects.filter(id=sink.id).exclude(failing_since=None).update(failing_since=None)  # it recovered
    _publish(sink.id)  # more is owed: a fresh task, so other sinks' tasks get their turn
    return delivered


def _claim(sink: Sink) -> tuple[uuid.UUID, str, list[SinkDelivery]]:
    """Lease one batch: a batch that was leased before (its worker died) whole and under its own
    name, else up to CRAWL_SINK_BATCH fresh records under a new name."""
    token, now = uuid.uuid4(), timezone.now()
    due = SinkDelivery.objects.filter(sink=sink, state=PENDING, next_at__lte=now)
    lease = {"token": token, "seconds": settings.CRAWL_SINK_LEASE_SECONDS, "state": LEASED}
    batch = due.exclude(batch="").order_by("id").values_list("batch", flat=True).first()
    if batch:
        lease_take(due.filter(batch=batch), **lease)
    else:
        batch = uuid.uuid4().hex[:16]
        ids = list(due.filter(batch="").order_by("id").values_list("id", flat=True)[: settings.CRAWL_SINK_BATCH])
        lease_take(due.filter(id__in=ids, batch=""), batch=batch, **lease)
    rows = list(SinkDelivery.objects.filter(lease_token=token).order_by("id"))
    return token, batch, rows


def _failed(sink: Sink, token: uuid.UUID, rows: list[SinkDelivery], exc: Exception) -> None:
    attempts = max(r.attempts for r in rows)
    error = masked_secrets(f"{type(exc).__name__}: {exc}", config_secrets(sink.config))[:2000]
    log.warning("sink %s (%s) failed on %d records: %s", sink.name, sink.kind, len(rows), error)
    Sink.objects.filter(id=sink.id, failing_since=None).update(failing_since=timezone.now())
    leased = SinkDelivery.objects.filter(lease_token=token, state=LEASED)
    if attempts >= settings.CRAWL_SINK_MAX_ATTEMPTS:
        lease_release(leased, state=FAILED, error=error)
        return
    wait = min(2.0**attempts, settings.CRAWL_SINK_MAX_BACKOFF_SECONDS)
    due = timezone.now() + timedelta(seconds=wait)
    lease_release(leased, state=PENDING, next_at=due, error=error)


def _fault_after_write(sink: Sink) -> None:
    """Fault injection for the tests (CRAWLHUB_FAULT_SINK_CRASH_DIR): the worker dies once per sink
    after the sink wrote a batch and before the batch is marked done: the redelivery case."""
    directory = os.environ.get("CRAWLHUB_FAULT_SINK_CRASH_DIR")
    if not directory:
        return
    marker = Path(directory) / f"sink-{sink.id}"
    if marker.exists():
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("crashed once\n")
    os.kill(os.getpid(), signal.SIGKILL)


def sinks_tick() -> dict[str, int]:
    """Batches whose lease expired (their worker died) become due again, whole; every sink with due
    records is woken. Beat runs it; so does the crawl command."""
    now = timezone.now()
    expired = SinkDelivery.objects.filter(lease_expired(now), state=LEASED)
    spent = Q(attempts__gte=settings.CRAWL_SINK_MAX_ATTEMPTS)
    failed = lease_release(expired.filter(spent), state=FAILED, error="the worker died delivering it, every attempt")
    returned = lease_release(expired.exclude(spent), state=PENDING, next_at=now)
    due = SinkDelivery.objects.filter(state=PENDING, next_at__lte=now)
    sink_ids = list(due.values_list("sink_id", flat=True).distinct().order_by())
    for sink_id in sink_ids:
        _publish(sink_id)
    return {"returned": returned, "failed": failed, "woken": len(sink_ids)}


def sink_retry(sink: Sink) -> int:
    """Give the sink's failed records fresh attempts and deliver them now. Returns records queued."""
    with transaction.atomic():
        queued = SinkDelivery.objects.filter(sink=sink, state=FAILED).update(
            state=PENDING, attempts=0, next_at=timezone.now(), error=""
        )
        if queued:
            transaction.on_commit(lambda: _publish(sink.id))
    return queued


def sinks_owed(project_id: int, *, failing: bool = True) -> int:
    """Records still to deliver (pending or being written) to the project's sinks; `failing=False`
    leaves out the sinks that are failing (a record of theirs waits to retry, or failed): a failing
    sink holds back no crawl."""
    owed = SinkDelivery.objects.filter(sink__project_id=project_id, state__in=(PENDING, LEASED))
    if not failing:
        erring = SinkDelivery.objects.filter(sink__project_id=project_id, state__in=(PENDING, FAILED))
        owed = owed.exclude(sink_id__in=erring.exclude(error="").values("sink_id"))
    return owed.count()


def project_sink_counts(project_id: int) -> dict[str, dict]:
    """Per sink of the project: records by state and the last error."""
    return {
        sink.name: sink_counts(sink) | {"last_error": sink_last_error(sink)}
        for sink in Sink.objects.filter(project_id=project_id).order_by("name")
    }


def sink_last_error(sink: Sink) -> str:
    """The newest error its records met ("" when none did)."""
    last = SinkDelivery.objects.filter(sink=sink).exclude(error="").order_by("-updated_at")
    return last.values_list("error", flat=True).first() or ""


def sink_counts(sink: Sink) -> dict[str, int]:
    rows = SinkDelivery.objects.filter(sink=sink).values_list("state").annotate(n=Count("id")).order_by()
    return {state: 0 for state in SinkDelivery.State.values} | dict(rows)
