"""Streamed exports for the API: the export command's rows and writers, a bounded batch at a time."""

import io
from collections.abc import Iterable, Iterator
from itertools import islice

from django.http import StreamingHttpResponse

from crawl.exports import FIELDS, export_rows, write_csv, write_jsonl
from crawl.models import Project

BATCH_ROWS = 500
CONTENT_TYPES = {"jsonl": "application/x-ndjson; charset=utf-8", "csv": "text/csv; charset=utf-8"}


def export_response(project: Project, *, what: str, fmt: str) -> StreamingHttpResponse:
    """The project's rows as JSON lines or CSV; memory stays flat whatever the project's size."""
    rows = export_rows(project, what)
    chunks = _csv_chunks(rows, FIELDS[what]) if fmt == "csv" else _jsonl_chunks(rows)
    response = StreamingHttpResponse(chunks, content_type=CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{project.slug}-{what}.{fmt}"'
    return response


def _batches(rows: Iterable[dict]) -> Iterator[list[dict]]:
    rows = iter(rows)
    while batch := list(islice(rows, BATCH_ROWS)):
        yield batch


def _jsonl_chunks(rows: Iterable[dict]) -> Iterator[str]:
    for batch in _batches(rows):
        out = io.StringIO()
        write_jsonl(batch, out)
        yield out.getvalue()


def _csv_chunks(rows: Iterable[dict], fields: list[str]) -> Iterator[str]:
    """write_csv writes a header per call: keep the first one (also for an empty export) only."""
    header = io.StringIO()
    write_csv([], header, fields)
    yield header.getvalue()
    for batch in _batches(rows):
        out = io.StringIO()
        write_csv(batch, out, fields)
        yield out.getvalue()[len(header.getvalue()) :]
