"""What a complete crawl of tests.site must have produced, checked from the export and server log."""

from collections import Counter
from urllib.parse import urlsplit


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def assert_complete(rows: list[dict], site, server_paths: list[str]) -> None:
    """Every reachable page exactly once and done; 404s, redirects and robots refusals as the site intends."""
    paths = Counter(path_of(r["url"]) for r in rows)
    assert [p for p, n in paths.items() if n > 1] == [], "a URL appears twice in the export"
    by_path = {path_of(r["url"]): r for r in rows}
    ok = {p for p, r in by_path.items() if r["state"] == "done" and r["status_code"] == 200}
    assert ok == site.pages
    for path in site.missing:
        assert (by_path[path]["state"], by_path[path]["error_code"]) == ("failed", "http_404")
    for path in site.private:
        assert (by_path[path]["state"], by_path[path]["error_code"]) == ("failed", "robots_disallowed")
    for path, target in site.redirects.items():
        assert by_path[path]["status_code"] == 301 and path_of(by_path[path]["final_url"]) == target
    assert not [p for p in server_paths if p.startswith("/private/")], "robots.txt was not obeyed"
    assert all(r["state"] in ("done", "failed") for r in rows), "work left pending"


def ledger_key(rows: list[dict]) -> set:
    """What two crawls of the same site must agree on, whatever ran them."""
    return {(path_of(r["url"]), r["state"], r["status_code"], r["error_code"], r["content_sha256"]) for r in rows}
