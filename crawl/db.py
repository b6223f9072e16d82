"""Portable insert-if-absent that reports exactly the rows it created (SQLite >= 3.35 and PostgreSQL)."""

from django.db import connection
from django.utils import timezone

INSERT_CHUNK = 500


def insert_new(model, objs: list, *, conflict_fields: tuple[str, ...]) -> list[int]:
    """INSERT ... ON CONFLICT (unique key) DO NOTHING RETURNING id.

    bulk_create(ignore_conflicts=True) cannot say which rows were new, and only the new ones may
    be handed to the next stage, so this one statement does both, without check-then-insert.
    """
    if not objs:
        return []
    now = timezone.now()
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    for obj in objs:
        for f in fields:
            if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
                setattr(obj, f.attname, now)
    table = connection.ops.quote_name(model._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    conflict = ", ".join(connection.ops.quote_name(model._meta.get_field(n).column) for n in conflict_fields)
    new_ids = []
    with connection.cursor() as cursor:
        for start in range(0, len(objs), INSERT_CHUNK):
            chunk = objs[start : start + INSERT_CHUNK]
            row = "(" + ", ".join(["%s"] * len(fields)) + ")"
            sql = (
                f"INSERT INTO {table} ({columns}) VALUES {', '.join([row] * len(chunk))} "
                f"ON CONFLICT ({conflict}) DO NOTHING RETURNING id"
            )
            params = [f.get_db_prep_save(getattr(o, f.attname), connection) for o in chunk for f in fields]
            cursor.execute(sql, params)
            new_ids.extend(r[0] for r in cursor.fetchall())
    return new_ids


def chunked(items: list, size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]
