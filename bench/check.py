"""The checker: a crawl's pages and the server's access log against the site's ground truth.

Same semantics as the shared bench's check_crawl.py: URLs compare as path with dot-segments resolved
plus sorted query (fragment dropped), on the truth's host:port. The bench reports (pages_report,
access_log_report); the tests assert on a crawl's exported rows (assert_complete, ledger_key).
Pure functions: no Django, no I/O.
"""

import posixpath
from collections import Counter
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit


def canon_path(url: str) -> str:
    """Path (dot-segments resolved) plus sorted query; scheme, host and fragment dropped."""
    parts = urlsplit(url)
    path = parts.path or "/"
    if "/." in path:
        resolved = posixpath.normpath(path)
        path = resolved + "/" if path.endswith("/") and resolved != "/" else resolved
        path = "/" + path.lstrip("/")  # normpath keeps a leading "//"
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return path + (f"?{query}" if query else "")


def truth_host(truth: dict) -> str:
    return urlsplit(truth["params"]["base_url"]).netloc.lower()


def pages_report(truth: dict, final_urls: Iterable[str], *, show: int = 5) -> dict:
    """Completeness of the crawled pages (final URLs of 2xx pages) against the reachable canonical URLs."""
    host, disallow = truth_host(truth), truth["robots_disallow"]
    expected = set(truth["pages"])
    seen, offhost = Counter(), 0
    for url in final_urls:
        if urlsplit(url).netloc.lower() != host:
            offhost += 1
            continue
        seen[canon_path(url)] += 1
    missing, extra = sorted(expected - set(seen)), sorted(set(seen) - expected)
    found = len(expected & set(seen))
    return {
        "items": sum(seen.values()),
        "expected_pages": len(expected),
        "pages_found": found,
        "completeness": round(found / len(expected), 6) if expected else None,
        "missing": len(missing),
        "missing_examples": missing[:show],
        "extra": len(extra),
        "extra_examples": extra[:show],
        "duplicate_items": sum(n - 1 for n in seen.values()),
        "robots_violations_in_items": sum(1 for p in seen if p.startswith(tuple(disallow))),
        "offhost_items": offhost,
    }


def parse_log_line(line: str) -> tuple[float, str, str, str, int] | None:
    """One line of the `bench` log format: $msec $status $request_method "$request_uri" $body_bytes_sent ..."""
    try:
        msec, status, method, rest = line.split(" ", 3)
        end = rest.index('"', 1)
        uri = rest[1:end]
        sent = int(rest[end + 2 :].split(" ", 1)[0])
        return float(msec), status, method, uri, sent
    except ValueError:
        return None


def access_log_report(truth: dict, lines: Iterable[str]) -> dict:
    """What the server saw, independently of the crawler: requests, statuses, repeats, robots violations."""
    disallow = tuple(truth["robots_disallow"])
    statuses, per_path, sent, times = Counter(), Counter(), 0, []
    for line in lines:
        parsed = parse_log_line(line)
        if parsed is None:
            continue
        msec, status, _method, uri, nbytes = parsed
        statuses[status] += 1
        per_path[canon_path(uri)] += 1
        sent += nbytes
        times.append(msec)
    return {
        "requests": sum(statuses.values()),
        "status": dict(sorted(statuses.items())),
        "bytes": sent,
        "distinct_expected_pages_requested": len(set(truth["pages"]) & set(per_path)),
        "duplicate_requests": sum(n - 1 for n in per_path.values()),
        "duplicate_examples": sorted(p for p, n in per_path.items() if n > 1)[:5],
        "robots_txt_requests": per_path.get("/robots.txt", 0),
        "robots_violations": sum(n for p, n in per_path.items() if p.startswith(disallow)),
        "first_to_last_request_s": round(max(times) - min(times), 3) if times else None,
    }


def _row_summary(row: dict | None) -> str:
    if row is None:
        return "never discovered"
    keys = ("state", "status_code", "error_code", "error_message", "attempts")
    return ", ".join(f"{k}={row[k]!r}" for k in keys if k in row)


def assert_complete(rows: list[dict], truth: dict, server_paths: list[str]) -> None:
    """Every reachable page exactly once and done; 404s, redirects and robots refusals as the site intends."""
    paths = Counter(canon_path(r["url"]) for r in rows)
    assert [p for p, n in paths.items() if n > 1] == [], "a URL appears twice in the export"
    by_path = {canon_path(r["url"]): r for r in rows}
    ok = {p for p, r in by_path.items() if r["state"] == "done" and r["status_code"] == 200}
    expected = set(truth["pages"])
    missing = sorted(expected - ok)
    assert not missing, "pages not done with 200: " + ", ".join(
        f"{p} ({_row_summary(by_path.get(p))})" for p in missing[:10]
    )
    assert ok == expected, f"pages done that the site does not have: {sorted(ok - expected)[:10]}"
    for path in truth["broken_urls"]:
        assert (by_path[path]["state"], by_path[path]["error_code"]) == ("failed", "http_404")
    for path in truth["disallowed_urls_linked"]:
        assert (by_path[path]["state"], by_path[path]["error_code"]) == ("failed", "robots_disallowed")
    for path, target in truth["redirects"].items():
        assert by_path[path]["status_code"] == 301 and canon_path(by_path[path]["final_url"]) == target
    disallow = tuple(truth["robots_disallow"])
    assert not [p for p in server_paths if p.startswith(disallow)], "robots.txt was not obeyed"
    assert all(r["state"] in ("done", "failed") for r in rows), "work left pending"


def ledger_key(rows: list[dict]) -> set:
    """What two crawls of the same site must agree on, whatever ran them."""
    return {(canon_path(r["url"]), r["state"], r["status_code"], r["error_code"], r["content_sha256"]) for r in rows}
