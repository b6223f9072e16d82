"""Exports stream in bounded chunks: every asset once, each with all the pages that reference it; the
items CSV has a column per field; exports filter by kind, job and time; no CSV cell can be read as a
spreadsheet formula."""

import csv
import io
import json
import os
import tempfile
import zlib
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from console.exports.rows import ExportFilter, export_response, export_rows, write_csv
from console.models import Job
from crawl.models import MediaAsset, Page, PageAsset, PageContent, Project
from crawl.services.projects import project_get_or_create
from scrape.models import Item
from scrape.services import pages_extract, pages_reextract


def test_it_exports_every_asset_with_its_pages_across_chunk_boundaries(db):
    project = project_get_or_create(name="exports")
    pages = Page.objects.bulk_create(
        [Page(project=project, url=f"http://a.test/p{i}", url_key=f"{i:064d}", host="a.test") for i in range(3)]
    )
    assets = MediaAsset.objects.bulk_create(
        [MediaAsset(project=project, url=f"http://a.test/i{i}.jpg", url_key=f"{i:064x}") for i in range(1203)]
    )
    PageAsset.objects.bulk_create([PageAsset(page=p, asset=a) for a in assets for p in pages[: 1 + a.id % 3]])
    rows = list(export_rows(project, "assets"))
    assert [r["url"] for r in rows] == [a.url for a in assets]
    by_url = {r["url"]: r["pages"] for r in rows}
    for asset in assets:
        assert by_url[asset.url] == [p.url for p in pages[: 1 + asset.id % 3]]


def items_project():
    """Two pages of two jobs, with a page item and a rule item each; the second page's changed later."""
    project = project_get_or_create(name="shop")
    first, second = Page.objects.bulk_create(
        [Page(project=project, url=f"http://a.test/{n}", url_key=f"{n:064d}", host="a.test", job_id=n) for n in (1, 2)]
    )
    Item.objects.create(project=project, page=first, kind="page", data={"title": "First"}, job_id=1)
    Item.objects.create(
        project=project, page=first, kind="rule:product", job_id=1,
        data={"name": "Kettle", "price": 25, "tags": ["tea", "steel"], "url": "/kettle"},
    )  # fmt: skip
    Item.objects.create(project=project, page=second, kind="page", data={"title": "Second"}, job_id=2)
    Item.objects.create(
        project=project, page=second, kind="rule:product", data={"name": "=HYPERLINK(1)", "sku": "T2"}, job_id=2
    )
    Item.objects.filter(page=second).update(updated_at=timezone.now() + timedelta(hours=1))
    return project


def export_command(*args: str) -> str:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "export")
        call_command("export", "shop", *args, "-o", path, stderr=io.StringIO())
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()


def test_the_items_csv_has_a_column_per_field_with_nested_values_as_json(db, admin_client):
    items_project()
    text = export_command("--what", "items", "--format", "csv", "--kind", "rule:product")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["url", "kind", "data.url", "name", "price", "sku", "tags", "errors", "updated_at"]
    kettle, other = rows
    assert (kettle["name"], kettle["price"], kettle["tags"], kettle["data.url"]) == (
        "Kettle",
        "25",
        '["tea", "steel"]',
        "/kettle",
    )
    assert (kettle["url"], kettle["sku"]) == ("http://a.test/1", "")
    assert other["name"] == "'=HYPERLINK(1)", "a field's text is guarded against formulas too"
    response = admin_client.get(
        "/api/projects/shop/export/", {"format": "csv", "what": "items", "kind": "rule:product"}
    )
    assert b"".join(response.streaming_content).decode() == text


def test_exports_are_filtered_by_kind_job_and_time(db, admin_client):
    items_project()
    soon = (timezone.now() + timedelta(minutes=30)).isoformat()

    def urls(text: str) -> list[tuple[str, str]]:
        return [(row["url"], row["kind"]) for row in map(json.loads, text.splitlines())]

    page_items = [("http://a.test/1", "page"), ("http://a.test/2", "page")]
    assert urls(export_command("--what", "items", "--kind", "page")) == page_items
    assert urls(export_command("--what", "items", "--job", "2")) == [
        ("http://a.test/2", "page"),
        ("http://a.test/2", "rule:product"),
    ]
    assert urls(export_command("--what", "items", "--since", soon)) == urls(
        export_command("--what", "items", "--job", "2")
    )
    assert [json.loads(r)["url"] for r in export_command("--job", "1").splitlines()] == ["http://a.test/1"]
    api = admin_client.get("/api/projects/shop/export/", {"what": "items", "kind": "page", "since": soon})
    assert urls(b"".join(api.streaming_content).decode()) == [("http://a.test/2", "page")]
    bad = admin_client.get("/api/projects/shop/export/", {"what": "items", "since": "yesterday"})
    assert bad.status_code == 400 and "since" in bad.json()
    with pytest.raises(CommandError, match="--since: 'yesterday' is not a time"):
        export_command("--what", "items", "--since", "yesterday")


def test_the_export_of_a_job_holds_what_it_produced_after_a_later_reextract(db, admin_client):
    """Issue 47, point 13: items and page versions keep the job that produced them, so `job=N`
    exports the first crawl's pages and items again after a re-extract by a later job (it held
    only a header); the re-extract, which found the same data, produced no item."""
    project = project_get_or_create(name="shop")
    crawl, reextract = (Job.objects.create(project=project, kind=kind) for kind in ("crawl", "reextract"))
    page = Page.objects.create(
        project=project, url="http://a.test/1", url_key="1" * 64, host="a.test", state="fetched",
        status_code=200, content_type="text/html",
    )  # fmt: skip
    PageContent.objects.create(page=page, headers={}, body=zlib.compress(b"<title>Kettle</title><p>A kettle.</p>"))
    for job, run in ((crawl, lambda: None), (reextract, lambda: pages_reextract(project=project))):
        Project.objects.filter(id=project.id).update(job_id=job.id)  # the job the claims stamp
        run()
        pages_extract(page_ids=[])
    assert Page.objects.get(id=page.id).job_id == reextract.id

    def exported(what: str, job: Job) -> list[str]:
        response = admin_client.get("/api/projects/shop/export/", {"what": what, "job": job.id})
        return [json.loads(line)["url"] for line in b"".join(response.streaming_content).decode().splitlines()]

    assert exported("items", crawl) == ["http://a.test/1"] == exported("pages", crawl)
    assert exported("items", reextract) == [], "it found the same data: the crawl's item"
    assert [r["url"] for r in export_rows(project, "items", ExportFilter(job=crawl.id))] == ["http://a.test/1"]


def test_it_writes_text_that_starts_like_a_formula_behind_a_quote():
    cells = ['=HYPERLINK("http://evil")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx", "a-b", "", "ok"]
    out = io.StringIO()
    write_csv([{"title": c, "depth": -5, "data": {"=k": "=v"}} for c in cells], out, ["title", "depth", "data"])
    rows = list(csv.DictReader(io.StringIO(out.getvalue(), newline="")))
    assert [r["title"] for r in rows] == ["'" + c for c in cells[:6]] + ["a-b", "", "ok"]
    assert {r["depth"] for r in rows} == {"-5"}, "numbers are numbers, not text"
    assert {r["data"] for r in rows} == {'{"=k": "=v"}'}, "JSON starts with {"


def test_a_formula_after_a_cell_separator_is_escaped():
    """A spreadsheet that splits on ";" (or "|", or a tab) reads x;=cmd as a second cell =cmd."""
    cells = ["x;=cmd|' /C calc'!A0", "a|+1", "b\t@SUM(A1)", "c,-1", "ok; fine", "a-b;c"]
    out = io.StringIO()
    write_csv([{"title": c, "depth": 3, "data": {"k": "x;=1"}} for c in cells], out, ["title", "depth", "data"])
    rows = [r["title"] for r in csv.DictReader(io.StringIO(out.getvalue(), newline=""))]
    assert rows == ["x;'=cmd|' /C calc'!A0", "a|'+1", "b\t'@SUM(A1)", "c,'-1", "ok; fine", "a-b;c"]
    assert "x;'=1" in out.getvalue() and "x;=1" not in out.getvalue(), "JSON cells too"
    for separator in ";|\t,":
        split = [part for row in rows for part in row.split(separator)[1:]]
        assert not [part for part in split if part.startswith(("=", "+", "-", "@"))], separator


def test_the_streamed_csv_export_escapes_formulas_too(db):
    project = project_get_or_create(name="csv-injection")
    url = "http://a.test/"
    Page.objects.create(project=project, url=url, url_key="1" * 64, host="a.test", title="=cmd|' /C calc'!A0")
    body = b"".join(export_response(project, what="pages", fmt="csv").streaming_content).decode()
    (row,) = csv.DictReader(io.StringIO(body, newline=""))
    assert row["title"] == "'=cmd|' /C calc'!A0" and row["url"] == url
