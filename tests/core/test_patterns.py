"""Hardening: users' regexes give up in bounded time (ReDoS), XML in encodings that hide entity
declarations is refused (UTF-7), CSV cells cannot be spreadsheet formulas, and new projects have a
depth and per-host cap that end a URL trap."""

import codecs
import csv
import io
import logging
import time

import pytest
from django.core.exceptions import ValidationError

from console.exports import export_response, write_csv
from core import patterns
from core.canonical import Scope
from crawl.models import Page, Project
from crawl.services.projects import project_get_or_create
from crawl.validators import regex_lines
from media.rules import MediaRules
from scrape.decide import extract_page
from scrape.models import Item, RuleSet
from scrape.rules import RuleError, compile_rules
from scrape.services import items_store
from scrape.sitemaps import Listing, parse_feed, parse_listing, parse_sitemap
from tests.conftest import run_manage
from tests.servers import Site, SiteServer

HTML = {"Content-Type": "text/html; charset=utf-8"}
SLOW = "(a|aa)+$"  # passes validation (no nested repeat), yet backtracks exponentially on "aaa...!"
HOSTILE = "a" * 1900 + "!"
# Each search may take MATCH_TIMEOUT, and a pattern runs MAX_TIMEOUTS times at most: then slack.
BOUND = patterns.MAX_TIMEOUTS * 0.2 + 2.0


# --- ReDoS --------------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(x+x+)+y", r"(\w+\s?)*$", r"(?:\d*)*", r"([a-z]{1,9})+"])
def test_it_refuses_nested_repeats_in_a_projects_patterns_and_rule_sets(pattern):
    with pytest.raises(ValidationError, match="catastrophic backtracking"):
        regex_lines(f"/ok/\n{pattern}")
    with pytest.raises(RuleError, match=r"fields\.p\.regex: .*catastrophic backtracking"):
        compile_rules({"fields": {"p": {"css": "p", "regex": pattern}}})
    with pytest.raises(RuleError, match=r"follow\[0\]: .*catastrophic backtracking"):
        compile_rules({"follow": [pattern]})


@pytest.mark.parametrize(
    "pattern", [r"/p\d{1,3}\.html", r"(/[a-z]+)+/$", r"(?:[^/]+/)*index\.html", r"(\d{4}-?)+", r"(?i)/LOGIN", SLOW]
)
def test_it_accepts_patterns_whose_repeats_are_delimited(pattern):
    regex_lines(pattern)
    compile_rules({"follow": [pattern], "fields": {"p": {"css": "p", "regex": pattern}}})


def test_a_catastrophic_scope_pattern_gives_up_in_bounded_time_and_then_is_not_run(caplog):
    scope = Scope.build(domains=["a.test"], deny=[SLOW])
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="crawlhub.patterns"):
        verdicts = [scope.rejects(f"http://a.test/{HOSTILE}", 1) for _ in range(20)]
    assert time.monotonic() - started < BOUND
    assert verdicts == ["denied"] * 20, "a deny pattern that gives up denies (fails closed)"
    assert scope.deny[0].given_up
    assert "not run again" in caplog.text and SLOW in caplog.text
    started = time.monotonic()
    assert scope.rejects("http://a.test/aa", 1) == "denied"  # given up: no longer run, still closed
    assert time.monotonic() - started < 0.05


def test_an_allow_pattern_that_gives_up_does_not_let_the_url_in():
    scope = Scope.build(domains=["a.test"], allow=[SLOW])
    assert scope.rejects(f"http://a.test/{HOSTILE}", 1) == "not_allowed"


def test_a_catastrophic_media_page_pattern_gives_up_in_bounded_time():
    rules = MediaRules.build(kinds=["video"], page_patterns=[SLOW])
    started = time.monotonic()
    assert rules.downloader_for(f"http://a.test/{HOSTILE}") == "http"
    assert time.monotonic() - started < BOUND


def test_a_catastrophic_field_regex_is_reported_on_the_item_through_the_real_extraction(db, caplog):
    project = Project.objects.create(name="redos", slug="redos")
    spec = {"fields": {"title": {"css": "h1"}, "code": {"css": "p.code", "regex": SLOW}}}
    RuleSet.objects.create(project=project, name="slow", spec=spec)  # saved: the pattern passes validation
    project.refresh_from_db()
    page = Page.objects.create(
        project=project, url="http://a.test/", url_key="0" * 64, host="a.test", content_type="text/html"
    )
    body = f'<h1>Hi</h1><p class="code">{"a" * 5000}!</p>'.encode()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="crawlhub.patterns"):
        items_store([extract_page(page, body, {"content-type": "text/html"})])
    assert time.monotonic() - started < BOUND
    item = Item.objects.get(page=page, kind="rule:slow")
    assert item.data == {"title": "Hi", "code": None}
    assert item.errors == [f"code: regex {SLOW!r} timed out (catastrophic backtracking): no match"]
    assert "gave up after" in caplog.text


@pytest.mark.integration
def test_a_worker_finishes_a_page_that_makes_a_rule_backtrack_catastrophically(workers, worker_env):
    site = Site()
    site.files["/robots.txt"] = (404, HTML, b"")
    long_text = "a" * 5000 + "!"
    site.files["/"] = (200, HTML, f'<h1>Hi</h1><p class="code">{long_text}</p><a href="/{HOSTILE}">x</a>'.encode())
    with SiteServer(site) as server:
        project = project_get_or_create(name="redos-worker", allow_private=True, download_media=False)
        Project.objects.filter(id=project.id).update(deny_patterns=SLOW)
        spec = {"fields": {"code": {"css": "p.code", "regex": SLOW}}}
        RuleSet.objects.create(project=project, name="slow", spec=spec)
        for stage in ("fetch", "extract"):
            workers.start(stage, stage, concurrency=1)
        started = time.monotonic()
        done = run_manage(
            ["crawl", f"{server.url}/", "--workers", "0", "--project", "redos-worker", "--timeout", "120"], worker_env
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert time.monotonic() - started < 60
    item = Item.objects.get(page__url=f"{server.url}/", kind="rule:slow")
    assert item.errors == [f"code: regex {SLOW!r} timed out (catastrophic backtracking): no match"]
    assert f"/{HOSTILE}" not in server.paths(), "a deny pattern that gives up denies the link"
    workers.stop_all(warm=True)
    assert "gave up after" in (workers.log_dir / "extract.log").read_text()


# --- XML in UTF-7 and other encodings that hide markup from a byte search -------------------------

PARSERS = [parse_sitemap, parse_feed, parse_listing]
BASE = "https://www.example.com/sitemap.xml"
URLSET = '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>{loc}</loc></url></urlset>'


def billion_laughs_in_utf7(root: str) -> bytes:
    levels = ['<!ENTITY lol0 "lol">'] + [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)]
    text = f"<!DOCTYPE lolz [{''.join(levels)}]>{root.replace('LOL', '&lol9;')}"
    hidden = text.replace("<", "+ADw-").replace("!", "+ACE-").replace(">", "+AD4-")  # valid UTF-7
    assert b"<!" not in hidden.encode() and codecs.decode(hidden.encode(), "utf-7") == text
    return b'<?xml version="1.0" encoding="UTF-7"?>' + hidden.encode()


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize(
    "root",
    [URLSET.format(loc="http://a.com/LOL"), "<rss><channel><item><link>http://a.com/LOL</link></item></channel></rss>"],
)
def test_it_refuses_a_billion_laughs_hidden_in_utf7(parse, root):
    started = time.monotonic()
    assert parse(billion_laughs_in_utf7(root), base_url=BASE) == Listing("unknown", error="unsafe_xml")
    assert time.monotonic() - started < 0.5


@pytest.mark.parametrize("encoding", ["utf-7", "cp037", "x-unknown-charset"])
def test_it_refuses_xml_declared_in_an_encoding_a_byte_search_cannot_read(encoding):
    body = f'<?xml version="1.0" encoding="{encoding}"?>{URLSET.format(loc="http://a.com/x")}'.encode()
    assert parse_sitemap(body, base_url=BASE).error == "unsafe_xml"
    assert parse_listing(body, base_url=BASE).error == "unsafe_xml"


@pytest.mark.parametrize("encoding", ["UTF-8", "utf-16", "UTF-16LE", "ISO-8859-1", "windows-1252", "Shift_JIS"])
def test_it_still_reads_sitemaps_declared_in_ordinary_encodings(encoding):
    xml = f'<?xml version="1.0" encoding="{encoding}"?>{URLSET.format(loc="http://a.com/caf%C3%A9")}'
    body = (codecs.BOM_UTF16_LE if encoding == "UTF-16LE" else b"") + xml.encode(encoding)
    for parse in (parse_sitemap, parse_listing):
        listing = parse(body, base_url=BASE)
        assert (listing.kind, listing.error, [u.url for u in listing.urls]) == (
            "urlset",
            "",
            ["http://a.com/caf%C3%A9"],
        )


# --- CSV formula injection ----------------------------------------------------------------------


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


# --- Default caps: a URL trap ends by itself --------------------------------------------------------


class TrapPages(dict):
    """Pages made up on request: /next/N links to /next/N+1, and /wide/N to ten new pages, for ever."""

    def get(self, path, default=None):
        kind, _, n = path.strip("/").partition("/")
        if kind not in ("next", "wide") or not n.isdigit():
            return (404, HTML, b"") if path == "/robots.txt" else default
        later = [int(n) + 1] if kind == "next" else range(int(n) * 10 + 1, int(n) * 10 + 11)
        links = "".join(f'<a href="/{kind}/{m}">{m}</a>' for m in later)
        return 200, HTML, f"<html><body><h1>{kind} {n}</h1>{links}</body></html>".encode()


def trap_crawl(env, url: str, project: str) -> None:
    done = run_manage(["crawl", url, "--workers", "0", "--project", project, "--timeout", "240"], env)
    assert done.returncode == 0, done.stdout + done.stderr


def test_new_projects_get_the_default_caps_and_zero_means_none(db, settings):
    assert (Project._meta.get_field("max_depth").default(), settings.CRAWL_DEFAULT_MAX_DEPTH) == (50, 50)
    project = project_get_or_create(name="capped")
    assert (project.max_depth, project.max_pages_per_host) == (50, 100_000)
    settings.CRAWL_DEFAULT_MAX_DEPTH, settings.CRAWL_DEFAULT_MAX_PAGES_PER_HOST = 0, 7
    other = project_get_or_create(name="uncapped")
    assert (other.max_depth, other.max_pages_per_host) == (None, 7)
    assert project_get_or_create(name="capped", max_depth=500).max_depth == 500, "a project raises its cap"


@pytest.mark.integration
def test_an_endless_chain_of_next_links_stops_at_the_default_depth(workers, worker_env, settings):
    site = Site(files=TrapPages())
    with SiteServer(site) as server:
        project = project_get_or_create(name="chain-trap", allow_private=True, download_media=False)
        for stage in ("fetch", "extract"):
            workers.start(stage, stage, concurrency=1)
        trap_crawl(worker_env, f"{server.url}/next/0", "chain-trap")
    depth = settings.CRAWL_DEFAULT_MAX_DEPTH
    fetched = sorted(int(p.rsplit("/", 1)[1]) for p in set(server.paths()) if p.startswith("/next/"))
    assert fetched == list(range(depth + 1))
    assert Page.objects.filter(project=project).count() == depth + 1


@pytest.mark.integration
def test_a_trap_that_fans_out_stops_at_the_default_per_host_cap(workers, worker_env, settings):
    settings.CRAWL_DEFAULT_MAX_PAGES_PER_HOST = 40  # the default a new project takes (100,000 unless set)
    site = Site(files=TrapPages())
    with SiteServer(site) as server:
        project = project_get_or_create(name="fan-trap", allow_private=True, download_media=False)
        assert project.max_pages_per_host == 40
        for stage in ("fetch", "extract"):
            workers.start(stage, stage, concurrency=1)
        trap_crawl(worker_env, f"{server.url}/wide/0", "fan-trap")
    assert Page.objects.filter(project=project).count() == 40
    assert len({p for p in server.paths() if p.startswith("/wide/")}) == 40
