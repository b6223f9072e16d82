"""Portable insert-if-absent that reports exactly the rows it created, and upsert (SQLite >= 3.35 and
PostgreSQL)."""

import datetime
import hashlib
import json
import uuid
from decimal import Decimal

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.utils import timezone
from psycopg.types.json import Jsonb

INSERT_CHUNK = 500


def insert_new(model, objs: list, *, conflict_fields: tuple[str, ...]) -> list[int]:
    """INSERT ... ON CONFLICT (unique key) DO NOTHING RETURNING id.

    bulk_create(ignore_conflicts=True) cannot say which rows were new, and only the new ones may
    be handed to the next stage, so this one statement does both, without check-then-insert.
    On PostgreSQL the rows travel as one JSON document (INSERT ... SELECT FROM json_to_recordset),
    or as one array per column (unnest) when a value has no JSON form: the statement's text stays
    the same size however many rows it carries, which spares the client and the server parsing
    tens of thousands of placeholders.
    """
    return _insert(model, objs, conflict_fields, "DO NOTHING")


def insert_new_ids(model, objs: list, *, conflict_fields: tuple[str, ...]) -> None:
    """insert_new that also sets the id of every object it inserted (the others keep None)."""
    by_key = {tuple(getattr(o, model._meta.get_field(n).attname) for n in conflict_fields): o for o in objs}
    returning = [model._meta.get_field(n).column for n in conflict_fields]
    for row in _insert(model, objs, conflict_fields, "DO NOTHING", returning=returning):
        by_key[tuple(row[1:])].id = row[0]


def upsert(
    model,
    objs: list,
    *,
    conflict_fields: tuple[str, ...],
    update_fields: tuple[str, ...],
    now=None,
    stamps: dict[str, str] | None = None,
) -> None:
    """INSERT ... ON CONFLICT (unique key) DO UPDATE SET the update_fields, in one statement per
    chunk; auto_now fields get `now` (one timestamp for the whole write, when given). `stamps`
    ({field: watched field}): a field that takes its new value only when the watched one changes
    (or it was empty), as who produced a value: writing the same value again keeps the stamp."""
    qn = connections[DEFAULT_DB_ALIAS].ops.quote_name
    table = qn(model._meta.db_table)
    columns = [model._meta.get_field(n).column for n in update_fields]
    sets = [f"{qn(c)} = EXCLUDED.{qn(c)}" for c in columns]
    for field, watched in (stamps or {}).items():
        c, w = qn(model._meta.get_field(field).column), qn(model._meta.get_field(watched).column)
        changed = f"{table}.{w} IS DISTINCT FROM EXCLUDED.{w} OR {table}.{c} IS NULL"
        sets.append(f"{c} = CASE WHEN {changed} THEN EXCLUDED.{c} ELSE {table}.{c} END")
    _insert(model, objs, conflict_fields, "DO UPDATE SET " + ", ".join(sets), now)


def upsert_add(model, objs: list, *, conflict_fields: tuple[str, ...], add_fields: tuple[str, ...]) -> None:
    """INSERT ... ON CONFLICT (unique key) DO UPDATE SET each add_field to its stored value plus the
    new one: counters many workers add to at once, without reading them first. Give the rows in
    one order (sorted by key) so that concurrent writers cannot deadlock."""
    qn = connections[DEFAULT_DB_ALIAS].ops.quote_name
    table = qn(model._meta.db_table)
    columns = [qn(model._meta.get_field(n).column) for n in add_fields]
    _insert(
        model, objs, conflict_fields, "DO UPDATE SET " + ", ".join(f"{c} = {table}.{c} + EXCLUDED.{c}" for c in columns)
    )


def _insert(model, objs: list, conflict_fields, action: str, now=None, returning=()) -> list:
    if not objs:
        return []
    now = now or timezone.now()
    # The connection itself, not django.db.connection: that proxy looks it up in a context-local
    # store on every attribute, and the fields' value calls touch it once per value.
    connection = connections[DEFAULT_DB_ALIAS]
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    for obj in objs:
        for f in fields:
            if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
                setattr(obj, f.attname, now)
    qn = connection.ops.quote_name
    head = f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(f.column) for f in fields)})"
    conflict = ", ".join(qn(model._meta.get_field(n).column) for n in conflict_fields)
    tail = f"ON CONFLICT ({conflict}) {action} RETURNING {', '.join(['id', *(qn(c) for c in returning)])}"
    rows = _pg_rows if connection.vendor == "postgresql" else _values_rows
    ids = []
    with connection.cursor() as cursor:
        for start in range(0, len(objs), INSERT_CHUNK):
            sql, params = rows(fields, objs[start : start + INSERT_CHUNK], connection)
            cursor.execute(f"{head} {sql} {tail}", params)
            ids.extend(r if returning else r[0] for r in cursor.fetchall())
    return ids


def _values_rows(fields, chunk, connection) -> tuple[str, list]:
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    params = [f.get_db_prep_save(getattr(o, f.attname), connection) for o in chunk for f in fields]
    return f"VALUES {', '.join([row] * len(chunk))}", params


def _pg_rows(fields, chunk, connection) -> tuple[str, list]:
    return _recordset_rows(fields, chunk, connection) or _unnest_rows(fields, chunk, connection)


def _recordset_rows(fields, chunk, connection) -> tuple[str, list] | None:
    """The rows as one JSON document, read back by json_to_recordset: one string parameter, made
    by the C JSON encoder, where arrays cost psycopg a Python dump of every element (the largest
    share of the extract stage's CPU). None when a value has no faithful JSON form (a JSON null, a
    non-finite float, a type of its own): the caller sends arrays instead."""
    keyed = [(f"c{i}", f) for i, f in enumerate(fields)]
    prepared = [(k, f.attname, json_preparer(f, connection.vendor)) for k, f in keyed]
    try:
        rows = [{k: prepare(getattr(o, a), connection) for k, a, prepare in prepared} for o in chunk]
        document = json.dumps(rows, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (NoJsonForm, ValueError):  # ValueError: NaN or an infinity
        return None
    columns = ", ".join(f"{k} {f.cast_db_type(connection)}" for k, f in keyed)
    return f"SELECT {', '.join(k for k, _ in keyed)} FROM json_to_recordset(%s::json) AS r({columns})", [document]


class NoJsonForm(Exception):
    pass


def json_value(value):
    """A prepared database value as json_to_recordset reads it into its column's type."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, Jsonb):
        if value.obj is None or value.dumps not in (None, json.dumps):
            raise NoJsonForm  # a JSON null reads back as SQL NULL; a custom encoder is its own
        return value.obj
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    raise NoJsonForm


_INTEGER_FIELDS = (
    models.IntegerField, models.BigIntegerField, models.SmallIntegerField, models.PositiveIntegerField,
    models.PositiveBigIntegerField, models.PositiveSmallIntegerField, models.AutoField, models.BigAutoField,
    models.SmallAutoField,
)  # fmt: skip
_TEXT_FIELDS = (models.CharField, models.TextField, models.URLField, models.SlugField, models.EmailField)
_PREPARERS: dict = {}


def json_preparer(field, vendor: str):
    """A function of (value, connection) giving json_value(field.get_db_prep_save(value, connection)):
    for the value types the stock fields store as they are (an int in an integer field, a str in a
    text field, an aware datetime, a dict or list in a JSONField without an encoder, None), without
    Django's chain of field calls, which cost more than the rest of an insert; anything else takes
    that chain."""
    key = (field, vendor)
    if key not in _PREPARERS:
        _PREPARERS[key] = _preparer(field)
    return _PREPARERS[key]


def _preparer(field):
    def slow(value, connection):
        return json_value(field.get_db_prep_save(value, connection))

    own = not field.many_to_one  # a foreign key stores its target's value
    target = field if own else field.target_field
    kind = type(target)
    if kind in _INTEGER_FIELDS:
        plain = (int,)
    elif kind in _TEXT_FIELDS:
        plain = (str,)
    elif kind is models.BooleanField:
        plain = (bool,)
    elif kind is models.JSONField and own and target.encoder is None:
        plain = (dict, list)
    elif kind is models.DateTimeField and own:
        return lambda v, connection: (
            v.isoformat() if type(v) is datetime.datetime and v.tzinfo is not None else slow(v, connection)
        )
    elif kind is models.UUIDField and own:
        return lambda v, connection: str(v) if type(v) is uuid.UUID else slow(v, connection)
    else:
        return slow
    return lambda v, connection: v if v is None or type(v) in plain else slow(v, connection)


def _unnest_rows(fields, chunk, connection) -> tuple[str, list]:
    arrays = ", ".join(f"%s::{f.cast_db_type(connection)}[]" for f in fields)
    params = [[f.get_db_prep_save(getattr(o, f.attname), connection) for o in chunk] for f in fields]
    return f"SELECT * FROM unnest({arrays})", params


def commit_order_lock(name: str) -> None:
    """Hold a lock named `name` until the caller's transaction ends, so the rows the holders insert
    commit in the order of their ids: a reader that has seen id N will never see a smaller id
    appear later (a feed read by id cursor). PostgreSQL: a transaction-scoped advisory lock, and a
    commit that waits for the disk even in a stage task (crawlproject/dbconnections.py), so a row a reader has
    seen is never taken back by a crash. SQLite needs none: its writers already take turns, each
    holding the database until it commits."""
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor != "postgresql":
        return
    if not connection.in_atomic_block:
        raise RuntimeError("commit_order_lock needs a transaction: it is held until the commit")
    key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit TO on")
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])


def chunked(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]
