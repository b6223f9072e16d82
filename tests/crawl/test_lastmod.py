"""Sitemap <lastmod> and feed entry dates feed the revisit decision: a known page whose entry says it
changed since its fetch is fetched again now; one whose entry did not change is not refetched early."""

from datetime import timedelta

from django.utils import timezone

from core.canonical import url_key
from crawl.frontier.discovery import pages_discover
from crawl.frontier.verdicts import Link
from crawl.models import Page, Project
from scrape.extraction import extract_page

SITEMAP = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>http://a.test/changed</loc><lastmod>%s</lastmod></url>
  <url><loc>http://a.test/same</loc><lastmod>2020-01-01</lastmod></url>
</urlset>"""


def done_page(project, url: str, fetched_ago: timedelta, **fields) -> Page:
    now = timezone.now()
    return Page.objects.create(
        project=project,
        url=url,
        url_key=url_key(url),
        host="a.test",
        state="done",
        fetched_at=now - fetched_ago,
        next_fetch_at=now + timedelta(hours=1),
        **fields,
    )


def test_a_sitemap_entry_changed_since_the_fetch_requeues_and_an_unchanged_one_waits(db):
    project = Project.objects.create(name="lm", slug="lm", revisit_max_seconds=30 * 86400)
    changed = done_page(project, "http://a.test/changed", timedelta(days=2))
    same = done_page(project, "http://a.test/same", timedelta(days=2))
    seed = done_page(project, "http://a.test/seed", timedelta(days=2), is_seed=True)
    sitemap = Page.objects.create(
        project=project, url="http://a.test/sitemap.xml", url_key=url_key("http://a.test/sitemap.xml"),
        host="a.test", kind="sitemap", state="fetched", status_code=200, content_type="application/xml",
    )  # fmt: skip
    yesterday = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%d")
    result = extract_page(sitemap, SITEMAP % yesterday.encode(), {"content-type": "application/xml"})
    by_url = {link.url: link for link in result.links}
    assert by_url["http://a.test/changed"].lastmod is not None, "the listing carries each entry's lastmod"

    pages_discover(project=project, links=result.links)
    pages_discover(project=project, links=[Link(seed.url, 0, lastmod=timezone.now() - timedelta(days=9))])
    changed.refresh_from_db()
    same.refresh_from_db()
    seed.refresh_from_db()
    assert changed.state == "queued", "changed since its fetch: fetched again now"
    assert same.state == "done" and same.next_fetch_at > timezone.now() + timedelta(days=27), "not refetched early"
    assert seed.next_fetch_at < timezone.now() + timedelta(hours=2), "a seed keeps its hub interval"
