"""Export a project's rows as JSON lines or CSV and its assets as tar, streamed (WARC: console/exports/warc.py)."""

import csv
import io
import json
import re
import tarfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from datetime import time as time_of_day
from itertools import islice

from django.db.models import Q, QuerySet
from django.http import StreamingHttpResponse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from crawl.models import MediaAsset, Page, PageAsset, PageVersion, Project
from scrape.models import Item

PAGE_FIELDS = [
    "url",
    "final_url",
    "status_code",
    "content_type",
    "title",
    "depth",
    "fetched_at",
    "content_sha256",
    "content_length",
    "state",
    "error_code",
    "error_message",
    "host",
    "proxy",  # stored with its password masked
]
ITEM_FIELDS = ["url", "kind", "data", "errors", "updated_at"]
ASSET_FIELDS = [
    "url",
    "kind",
    "state",
    "sha256",
    "size",
    "mime",
    "storage_key",
    "downloader",
    "metadata",
    "status_code",
    "error_code",
    "error_message",
    "pages",
]
FIELDS = {"pages": PAGE_FIELDS, "items": ITEM_FIELDS, "assets": ASSET_FIELDS}
CHUNK = 2000
# Formats that stream over HTTP (the admin's and the API's export), and rows written per chunk.
CONTENT_TYPES = {"jsonl": "application/x-ndjson; charset=utf-8", "csv": "text/csv; charset=utf-8"}
STREAM_BATCH_ROWS = 500
# Text a spreadsheet would run as a formula (CSV injection): such cells get a leading ' (OWASP's advice).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# A spreadsheet set to split on ";" (or "|", or a tab) reads "x;=cmd" as two cells, the second a
# formula: such a formula start after a separator gets its ' too.
_FORMULA_AFTER_SEPARATOR = re.compile(r"(?<=[;,|\t])(?=[=+\-@])")


@dataclass(frozen=True)
class ExportFilter:
    """Which rows an export holds: of one kind (pages: page, sitemap or feed; items: page,
    rule:<name>, api or spider; assets: image, video, audio...), of one job (what it produced:
    the items whose data it extracted, the pages it fetched a version of or last processed, the
    assets it last claimed; a later job re-extracting the same data leaves them its), and changed
    since a time (an incremental export)."""

    kind: str | None = None
    job: int | None = None
    since: datetime | None = None

    def apply(self, queryset: QuerySet) -> QuerySet:
        if self.kind:
            queryset = queryset.filter(kind=self.kind)
        if self.job is not None:
            queryset = queryset.filter(_of_job(queryset.model, self.job))
        if self.since is not None:
            queryset = queryset.filter(updated_at__gte=self.since)
        return queryset


EVERYTHING = ExportFilter()


def _of_job(model, job: int) -> Q:
    """The rows of `model` the job produced (see ExportFilter)."""
    if model is Page:
        return Q(job_id=job) | Q(id__in=PageVersion.objects.filter(job_id=job).values("page_id"))
    return Q(job_id=job)


def parse_since(text: str) -> datetime:
    """An ISO 8601 time ("2026-11-26T08:00:00Z", "2026-11-26 08:00") or date (midnight); without a
    zone, UTC. ValueError with the accepted forms otherwise."""
    when = parse_datetime(text.strip())
    if when is None and (day := parse_date(text.strip())) is not None:
        when = datetime.combine(day, time_of_day.min)
    if when is None:
        raise ValueError(f"{text!r} is not a time: use ISO 8601, like 2026-11-26T08:00:00Z or 2026-11-26")
    return when if timezone.is_aware(when) else timezone.make_aware(when, UTC)


def export_rows(project: Project, what: str, rows: ExportFilter = EVERYTHING) -> Iterator[dict]:
    if what == "pages":
        qs = rows.apply(Page.objects.filter(project=project)).order_by("id").values(*PAGE_FIELDS)
        yield from qs.iterator(chunk_size=CHUNK)
    elif what == "items":
        qs = _items(project, rows).order_by("id").values("page__url", *ITEM_FIELDS[1:])
        for row in qs.iterator(chunk_size=CHUNK):
            yield {"url": row.pop("page__url"), **row}
    elif what == "assets":
        yield from _asset_rows(project, rows)
    else:
        raise ValueError(f"cannot export {what!r}: choose pages, items or assets")


def _items(project: Project, rows: ExportFilter) -> QuerySet:
    return rows.apply(Item.objects.filter(project=project))


def export_count(project: Project, what: str, rows: ExportFilter = EVERYTHING) -> int:
    """How many rows export_rows(project, what, rows) yields (for progress)."""
    if what == "items":
        return _items(project, rows).count()
    model = {"pages": Page, "assets": MediaAsset}[what]
    return rows.apply(model.objects.filter(project=project)).count()


def item_columns(project: Project, rows: ExportFilter = EVERYTHING) -> list[str]:
    """The items CSV's columns: url and kind, one per field of the items' data (sorted by name: the
    database keeps no field order; a field named like a fixed column is "data.<name>"; data that is
    not an object is "value"), then errors and updated_at. One pass over the data, a chunk at a time."""
    fields: dict[str, None] = {}
    for data in _items(project, rows).order_by("id").values_list("data", flat=True).iterator(chunk_size=CHUNK):
        for name in data if isinstance(data, dict) else ["value"]:
            fields.setdefault(_column(str(name)), None)
    return ["url", "kind", *sorted(fields), "errors", "updated_at"]


def _column(name: str) -> str:
    return f"data.{name}" if name in ITEM_CSV_FIXED or name.startswith("data.") else name


ITEM_CSV_FIXED = ("url", "kind", "errors", "updated_at")


def item_csv_rows(rows: Iterable[dict]) -> Iterator[dict]:
    """Items as CSV rows: each field of the data in a column of its own (nested values become JSON
    in write_csv)."""
    for row in rows:
        data = row.get("data")
        fields = data if isinstance(data, dict) else {"value": data}
        yield {_column(str(k)): v for k, v in fields.items()} | {k: row[k] for k in ITEM_CSV_FIXED}


def csv_columns(project: Project, what: str, rows: ExportFilter = EVERYTHING) -> list[str]:
    return item_columns(project, rows) if what == "items" else FIELDS[what]


def csv_rows(project: Project, what: str, rows: ExportFilter = EVERYTHING) -> Iterator[dict]:
    exported = export_rows(project, what, rows)
    return item_csv_rows(exported) if what == "items" else exported


def _asset_rows(project: Project, rows: ExportFilter) -> Iterator[dict]:
    """Assets with the URLs of the pages that reference them, a bounded chunk at a time (SQLite
    refuses huge IN lists, and a prefetch of every link of a big crawl would build one)."""
    fields = [f for f in ASSET_FIELDS if f != "pages"]
    last_id = 0
    while True:
        chunk = list(
            rows.apply(MediaAsset.objects.filter(project=project, id__gt=last_id))
            .order_by("id")
            .values("id", *fields)[:500]
        )
        if not chunk:
            return
        pages: dict[int, list[str]] = {}
        links = PageAsset.objects.filter(asset_id__in=[a["id"] for a in chunk]).order_by("page_id")
        for asset_id, url in links.values_list("asset_id", "page__url"):
            pages.setdefault(asset_id, []).append(url)
        for asset in chunk:
            last_id = asset.pop("id")
            yield asset | {"pages": pages.get(last_id, [])}


def write_jsonl(rows, out) -> int:
    n = 0
    for row in rows:
        out.write(json.dumps(row, default=str, ensure_ascii=False) + "\n")
        n += 1
    return n


def write_csv(rows, out, fields: list[str]) -> int:
    writer = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    n = 0
    for row in rows:
        writer.writerow({k: csv_cell(v) for k, v in row.items()})
        n += 1
    return n


def csv_cell(value):
    """One value as a CSV cell: lists and dicts as JSON; text starting like a formula, at its start
    or after a separator, behind a '."""
    if isinstance(value, (dict, list)):
        value = json.dumps(value, default=str)
    elif not isinstance(value, str):
        return value
    value = _FORMULA_AFTER_SEPARATOR.sub("'", value)
    return "'" + value if value.startswith(FORMULA_STARTS) else value


TAR_MODES = {"tar": "w", "tar.gz": "w:gz", "tar.bz2": "w:bz2"}


def write_tar(project: Project, path: str, fmt: str) -> int:
    """The project's stored assets, each content once under assets/<sha256>, with manifest.jsonl
    first: one line per asset row (url, kind, state, sha256, size, mime, pages, path in the archive)."""
    from core.storage import object_size, open_object

    rows = list(export_rows(project, "assets"))
    stored = {r["sha256"]: r["storage_key"] for r in rows if r["state"] == "done" and r["storage_key"]}
    manifest = "".join(json.dumps(_manifest_row(r, stored), default=str) + "\n" for r in rows).encode()
    with tarfile.open(path, TAR_MODES[fmt]) as archive:
        _add_bytes(archive, "manifest.jsonl", manifest)
        for sha256, key in sorted(stored.items()):
            with open_object(key) as handle:
                info = tarfile.TarInfo(f"assets/{sha256}")
                info.size, info.mtime = object_size(key), int(time.time())
                archive.addfile(info, handle)
    return len(rows)


def _manifest_row(row: dict, stored: dict) -> dict:
    keep = ("url", "kind", "state", "sha256", "size", "mime", "error_code", "pages")
    return {k: row[k] for k in keep} | {"path": f"assets/{row['sha256']}" if row["sha256"] in stored else None}


def _add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), int(time.time())
    archive.addfile(info, io.BytesIO(data))


def export_response(project: Project, *, what: str, fmt: str, rows: ExportFilter = EVERYTHING) -> StreamingHttpResponse:
    """The project's rows as JSON lines or CSV over HTTP; memory stays flat whatever its size."""
    if fmt == "csv":
        chunks = _csv_chunks(csv_rows(project, what, rows), csv_columns(project, what, rows))
    else:
        chunks = _jsonl_chunks(export_rows(project, what, rows))
    response = StreamingHttpResponse(chunks, content_type=CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{project.slug}-{what}.{fmt}"'
    return response


def _batches(rows: Iterable[dict]) -> Iterator[list[dict]]:
    rows = iter(rows)
    while batch := list(islice(rows, STREAM_BATCH_ROWS)):
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
