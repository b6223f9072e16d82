"""Portable insert-if-absent that reports exactly the rows it created, and upsert (SQLite >= 3.35 and
PostgreSQL)."""

from django.db import connection
from django.utils import timezone

INSERT_CHUNK = 500


def insert_new(model, objs: list, *, conflict_fields: tuple[str, ...]) -> list[int]:
    """INSERT ... ON CONFLICT (unique key) DO NOTHING RETURNING id.

    bulk_create(ignore_conflicts=True) cannot say which rows were new, and only the new ones may
    be handed to the next stage, so this one statement does both, without check-then-insert.
    On PostgreSQL the rows travel as one array per column (INSERT ... SELECT FROM unnest): the
    statement's text stays the same size however many rows it carries, which spares the client
    and the server parsing tens of thousands of placeholders.
    """
    return _insert(model, objs, conflict_fields, "DO NOTHING")


def insert_new_ids(model, objs: list, *, conflict_fields: tuple[str, ...]) -> None:
    """insert_new that also sets the id of every object it inserted (the others keep None)."""
    by_key = {tuple(getattr(o, model._meta.get_field(n).attname) for n in conflict_fields): o for o in objs}
    returning = [model._meta.get_field(n).column for n in conflict_fields]
    for row in _insert(model, objs, conflict_fields, "DO NOTHING", returning=returning):
        by_key[tuple(row[1:])].id = row[0]


def upsert(model, objs: list, *, conflict_fields: tuple[str, ...], update_fields: tuple[str, ...], now=None) -> None:
    """INSERT ... ON CONFLICT (unique key) DO UPDATE SET the update_fields, in one statement per
    chunk; auto_now fields get `now` (one timestamp for the whole write, when given)."""
    qn = connection.ops.quote_name
    columns = [model._meta.get_field(n).column for n in update_fields]
    _insert(
        model, objs, conflict_fields, "DO UPDATE SET " + ", ".join(f"{qn(c)} = EXCLUDED.{qn(c)}" for c in columns), now
    )


def _insert(model, objs: list, conflict_fields, action: str, now=None, returning=()) -> list:
    if not objs:
        return []
    now = now or timezone.now()
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    for obj in objs:
        for f in fields:
            if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
                setattr(obj, f.attname, now)
    qn = connection.ops.quote_name
    head = f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(f.column) for f in fields)})"
    conflict = ", ".join(qn(model._meta.get_field(n).column) for n in conflict_fields)
    tail = f"ON CONFLICT ({conflict}) {action} RETURNING {', '.join(['id', *(qn(c) for c in returning)])}"
    rows = _unnest_rows if connection.vendor == "postgresql" else _values_rows
    ids = []
    with connection.cursor() as cursor:
        for start in range(0, len(objs), INSERT_CHUNK):
            sql, params = rows(fields, objs[start : start + INSERT_CHUNK])
            cursor.execute(f"{head} {sql} {tail}", params)
            ids.extend(r if returning else r[0] for r in cursor.fetchall())
    return ids


def _values_rows(fields, chunk) -> tuple[str, list]:
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    params = [f.get_db_prep_save(getattr(o, f.attname), connection) for o in chunk for f in fields]
    return f"VALUES {', '.join([row] * len(chunk))}", params


def _unnest_rows(fields, chunk) -> tuple[str, list]:
    arrays = ", ".join(f"%s::{f.cast_db_type(connection)}[]" for f in fields)
    params = [[f.get_db_prep_save(getattr(o, f.attname), connection) for o in chunk] for f in fields]
    return f"SELECT * FROM unnest({arrays})", params


def chunked(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]
