"""The checker: a crawl's pages and the server's access log against the site's ground truth.

Same semantics as the shared bench's check_crawl.py: URLs compare as path with dot-segments resolved
plus sorted query (fragment dropped), on the truth's host:port. Pure functions: no Django, no I/O.
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
