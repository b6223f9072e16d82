"""The lease, one primitive for pages, assets and the sinks' outbox: claim rows with a
compare-and-set UPDATE stamped with a fresh token, and finish them only while that token still
holds them (a zombie worker's late write fails). Never held across a transaction: a lease is a
column, not a lock."""

import json
import os
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connections
from django.db.models import F, OuterRef, Q, QuerySet, Subquery
from django.db.models.sql import Query
from django.utils import timezone

from core.batchsql import NoJsonForm, chunked, json_preparer
from crawl.models import HostLease, Project

FINISH_CHUNK = 100


def lease_holder(worker: str) -> str:
    """The name a claim records for its holder: the Celery worker and the process in it
    ("fetch@host#1234"), so the reaper can tell a dead pool process of a live worker."""
    return f"{worker[:180]}#{os.getpid()}"


def lease_expired(now) -> Q:
    """A lease its worker did not finish in time (died, or hung past the hard time limit)."""
    return Q(lease_expires_at__isnull=False, lease_expires_at__lt=now)


def lease_take(rows: QuerySet, *, token: uuid.UUID, seconds: float | None = None, **columns) -> int:
    """Lease `rows` (a queryset whose filter is the claim's condition) under `token` for `seconds`
    (CRAWL_LEASE_SECONDS by default): one conditional UPDATE, so two claimers never both win a row,
    and each claim spends an attempt. Returns the rows leased."""
    until = timezone.now() + timedelta(seconds=settings.CRAWL_LEASE_SECONDS if seconds is None else seconds)
    return rows.update(lease_token=token, lease_expires_at=until, attempts=F("attempts") + 1, **columns)


def lease_release(rows: QuerySet, **columns) -> int:
    """Hand leased rows back (their holder finished, failed, or died): the lease cleared and
    `columns` written in one UPDATE. Returns the rows released."""
    return rows.update(lease_token=None, lease_expires_at=None, **columns)


def lease_claim(
    model, ids: list[int], *, claimable: Q, token: uuid.UUID | None = None, **columns
) -> tuple[uuid.UUID, list]:
    """Lease the claimable rows among ids: one conditional UPDATE, so two workers given the same
    ids never both win a row. Each claim spends an attempt (the attempt cap counts claims, lease
    expiries included). Returns the token (`token`, else a new one) and the rows it now holds, with
    their project."""
    token = token or uuid.uuid4()
    # The row records the job its project runs now (the console's; empty when none): a job's counts
    # are its rows.
    job = Subquery(Project.objects.filter(id=OuterRef("project_id")).values("job_id")[:1])
    lease_take(model.objects.filter(claimable, id__in=ids), token=token, job_id=job, **columns)
    if _task["running"]:
        _task["claimed"].append((model, token))
    rows = list(model.objects.filter(id__in=ids, lease_token=token))
    # One Project object per project, not one per row as select_related builds (a batch is one
    # project nearly always, and a Project has some sixty columns to instantiate).
    projects = Project.objects.in_bulk({row.project_id for row in rows})
    for row in rows:
        row.project = projects[row.project_id]
    return token, rows


def lease_finish(model, *, token: uuid.UUID, from_state: str, changes: dict[int, dict]) -> set[int]:
    """Write each row's columns only if `token` still holds it in `from_state`: one compare-and-set
    UPDATE per chunk, each row with its own values; returns the ids written."""
    written = set()
    for chunk in chunked(sorted(changes), FINISH_CHUNK):
        written |= _finish_chunk(model, token, from_state, {i: changes[i] for i in chunk})
    return written


def _finish_chunk(model, token, from_state: str, changes: dict[int, dict]) -> set[int]:
    """UPDATE ... WHERE id IN (...) AND lease_token = token AND state = from_state RETURNING id, as
    SQL: Django's Case/When expressions cost more CPU than the write itself."""
    connection = connections[model.objects.db]
    now = timezone.now()
    released = {"lease_token": None, "lease_expires_at": None}
    rows = {pid: released | c | {"updated_at": now} for pid, c in changes.items()}
    names = sorted({n for row in rows.values() for n in row})
    if connection.vendor == "postgresql":
        written = _finish_from_json(model, connection, token, from_state, rows, names)
        if written is not None:
            return written
    writer = _ColumnWriter(model, connection, rows)
    assignments = [writer.assignment(name) for name in names]
    qn, ids = connection.ops.quote_name, list(rows)
    sql = (
        f"UPDATE {qn(model._meta.db_table)} SET {', '.join(assignments)} "
        f"WHERE {qn('id')} IN ({', '.join(['%s'] * len(ids))}) AND {qn('lease_token')} = %s AND {qn('state')} = %s "
        f"RETURNING {qn('id')}"
    )
    token_value = model._meta.get_field("lease_token").get_db_prep_value(token, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*writer.params, *ids, token_value, from_state])
        return {row[0] for row in cursor.fetchall()}


def _finish_from_json(model, connection, token, from_state: str, rows: dict[int, dict], names: list[str]):
    """_finish_chunk on PostgreSQL with the per-row values as one JSON document
    (UPDATE ... FROM json_to_recordset): the statement's text depends on the columns, not on the
    rows, so psycopg parses it once per shape instead of once per call (a CASE branch per row made
    every statement new and long: parsing it was half the cost of finishing a batch). A value all
    rows share is one parameter, an expression (F("attempts") - 1) is compiled once when all rows
    share it. None when a value has no JSON form or rows differ on an expression: the caller writes
    the CASE form instead."""
    qn = connection.ops.quote_name
    table = qn(model._meta.db_table)
    compiler = Query(model).get_compiler(connection=connection)
    assignments, params, columns, keyed, partial = [], [], ["id bigint"], [], []
    for i, name in enumerate(names):
        field = model._meta.get_field(name)
        column = f"{table}.{qn(field.column)}"
        present = [row[name] for row in rows.values() if name in row]
        first = present[0]
        shared = len(present) == len(rows) and all(type(v) is type(first) and v == first for v in present)
        if hasattr(first, "resolve_expression") or any(hasattr(v, "resolve_expression") for v in present):
            if not shared:
                return None
            sql, expression_params = compiler.compile(first.resolve_expression(compiler.query, for_save=True))
            assignments.append(f"{qn(field.column)} = {sql}")
            params.extend(expression_params)
            continue
        if shared:
            assignments.append(f"{qn(field.column)} = %s::{field.cast_db_type(connection)}")
            params.append(field.get_db_prep_save(first, connection))
            continue
        key = f"c{i}"
        columns.append(f"{key} {field.cast_db_type(connection)}")
        keyed.append((key, name, json_preparer(field, connection.vendor)))
        if len(present) == len(rows):
            assignments.append(f"{qn(field.column)} = v.{key}")
        else:  # rows without the column keep what they have
            columns.append(f"h{i} boolean")
            partial.append((f"h{i}", name))
            assignments.append(f"{qn(field.column)} = CASE WHEN v.h{i} THEN v.{key} ELSE {column} END")
    try:
        document = json.dumps(
            [
                {"id": pid}
                | {k: prepare(row[n], connection) for k, n, prepare in keyed if n in row}
                | {h: n in row for h, n in partial}
                for pid, row in rows.items()
            ],
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
        )
    except (NoJsonForm, ValueError, TypeError):
        return None
    sql = (
        f"UPDATE {table} SET {', '.join(assignments)} FROM json_to_recordset(%s::json) AS v({', '.join(columns)}) "
        f"WHERE {table}.{qn('id')} = v.id AND {table}.{qn('lease_token')} = %s AND {table}.{qn('state')} = %s "
        f"RETURNING {table}.{qn('id')}"
    )
    token_value = model._meta.get_field("lease_token").get_db_prep_value(token, connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, document, token_value, from_state])
        return {row[0] for row in cursor.fetchall()}


class _ColumnWriter:
    """SET clauses for per-row values: one value when every row agrees, else a CASE on the id
    (rows without the column keep what they have). Expressions such as F("attempts") - 1 are
    compiled by Django once each."""

    def __init__(self, model, connection, rows: dict[int, dict]):
        self.model, self.connection, self.rows, self.params = model, connection, rows, []
        self.compiler = Query(model).get_compiler(connection=connection)
        self.casts = connection.vendor == "postgresql"  # a typed literal in every CASE branch

    def assignment(self, name: str) -> str:
        field = self.model._meta.get_field(name)
        column = self.connection.ops.quote_name(field.column)
        present = [(pid, row[name]) for pid, row in self.rows.items() if name in row]
        first = present[0][1]
        if len(present) == len(self.rows) and all(type(v) is type(first) and v == first for _, v in present):
            return f"{column} = {self.value(field, first)}"
        branches = []
        for pid, value in present:
            self.params.append(pid)
            branches.append(f"WHEN %s THEN {self.value(field, value)}")
        return f"{column} = CASE {self.connection.ops.quote_name('id')} {' '.join(branches)} ELSE {column} END"

    def value(self, field, value) -> str:
        if hasattr(value, "resolve_expression"):
            sql, params = self.compiler.compile(value.resolve_expression(self.compiler.query, for_save=True))
            self.params.extend(params)
            return sql
        self.params.append(field.get_db_prep_save(value, self.connection))
        return f"%s::{field.cast_db_type(self.connection)}" if self.casts else "%s"


# The claims of the Celery task this process runs. A task that fails (the database restarted under
# it, say) leaves rows leased by a process that lives on: its heartbeats say nothing is wrong, so
# the process itself gives them up before its next task, once the database answers again, and the
# reaper hands them back at once instead of after CRAWL_LEASE_SECONDS.
_task: dict = {"running": False, "claimed": [], "abandoned": []}


def leases_task_started(**_) -> None:
    _task["running"], _task["claimed"] = True, []
    if _task["abandoned"]:
        try:
            leases_give_up(_task["abandoned"])
            _task["abandoned"] = []
        except DatabaseError:  # still away: the next task tries again
            pass


def leases_task_ended(*, state: str | None = None, **_) -> None:
    if state != "SUCCESS":
        _task["abandoned"] += _task["claimed"]
    _task["running"], _task["claimed"] = False, []


def leases_give_up(claims: list[tuple[type, uuid.UUID]]) -> int:
    """Expire the leases of these claims that still hold rows, and the host capacity they booked."""
    past = timezone.now() - timedelta(seconds=1)
    given = 0
    for model, token in claims:
        given += model.objects.filter(lease_token=token, lease_expires_at__gt=past).update(lease_expires_at=past)
        HostLease.objects.filter(token=token).update(expires_at=past)
    return given


def leases_task_connect() -> None:
    """Track each task's claims (called once, from ready())."""
    from celery import signals

    signals.task_prerun.connect(leases_task_started, dispatch_uid="crawlhub.leases.pre", weak=False)
    signals.task_postrun.connect(leases_task_ended, dispatch_uid="crawlhub.leases.post", weak=False)
