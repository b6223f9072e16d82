"""The ground truth of a planned site: what a complete, robots-obeying crawl from / must find.

Written as ground_truth.json in the shared bench's format (same keys), computed by BFS over the
planned links with the site's redirects, 404s and robots.txt rule applied.
"""

import hashlib
from urllib.parse import urljoin, urlsplit

from bench.check import canon_path
from bench.sitegen import GENERATOR_VERSION, PRIVATE_PREFIX, Site, page_html

MAX_HOPS = 10


def ground_truth(site: Site) -> dict:
    by_path = {page.path: page for page in site.pages}
    walk = _Walk(site, by_path)
    walk.run()
    reached = sorted(walk.depth)
    media = sorted({src for cp in reached for _, src in by_path[urlsplit(cp).path].media})
    return {
        "generator": "crawlhub bench/sitegen.py",
        "generator_version": GENERATOR_VERSION,
        "params": {"n": site.n, "seed": site.seed, "base_url": site.base_url, "sections": site.sections},
        "canonicalization": "scheme://host:port + path with dot-segments resolved + query params sorted; "
        "fragment dropped",
        "robots_disallow": [PRIVATE_PREFIX],
        "n_pages": len(reached),
        "n_content_files": len({urlsplit(cp).path for cp in reached}),
        "n_query_variant_urls": sum(1 for cp in reached if "?" in cp),
        "max_depth": max(walk.depth.values()),
        "html_bytes_total": sum(len(page_html(by_path[urlsplit(cp).path]).encode()) for cp in reached),
        "pages": reached,
        "media_count": len(media),
        "media_bytes_total": sum(len(site.media[m]) for m in media),
        "media": {
            "images": [m for m in media if m.endswith(".jpg")],
            "videos": [m for m in media if m.endswith(".mp4")],
        },
        "redirects": {p: site.redirects[p] for p in sorted(walk.redirect_links - walk.loops)},
        "redirect_loops": sorted(walk.loops),
        "broken_urls": sorted(walk.broken),
        "disallowed_urls_linked": sorted(walk.disallowed),
        "external_urls_linked": len(walk.external),
    }


def media_sha256(site: Site, truth: dict) -> dict[str, str]:
    """The sha256 of each medium a complete crawl stores (the truth's images and videos), by path."""
    media = truth["media"]["images"] + truth["media"]["videos"]
    return {path: hashlib.sha256(site.media[path]).hexdigest() for path in media}


class _Walk:
    """Breadth-first from / over the planned links, sorting every link into what a crawler meets."""

    def __init__(self, site: Site, by_path: dict):
        self.site, self.by_path = site, by_path
        self.host = urlsplit(site.base_url).netloc.lower()
        self.depth = {"/": 0}
        self.broken, self.disallowed, self.external, self.loops, self.redirect_links = set(), set(), set(), set(), set()

    def run(self) -> None:
        frontier = ["/"]
        while frontier:
            following = []
            for cp in frontier:
                page_url = self.site.base_url + cp
                for href in [*self.by_path[urlsplit(cp).path].hrefs, "/"]:
                    target = self._resolve(urljoin(page_url, href))
                    if target and target not in self.depth:
                        self.depth[target] = self.depth[cp] + 1
                        following.append(target)
            frontier = following

    def _resolve(self, url: str) -> str | None:
        """The canonical path of the page a link leads to, or None (recording why there is none)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            return None
        if parts.netloc.lower() != self.host:
            self.external.add(url.split("#")[0])
            return None
        canonical = canon_path(url)
        path, _, query = canonical.partition("?")
        if path in self.site.redirects:
            self.redirect_links.add(path)
        seen = set()
        while path in self.site.redirects:
            if path in seen or len(seen) > MAX_HOPS:
                self.loops.add(path)
                return None
            seen.add(path)
            path = self.site.redirects[path]
        target = path + (f"?{query}" if query else "")
        if path.startswith(PRIVATE_PREFIX):
            self.disallowed.add(target)
        elif path not in self.by_path:
            self.broken.add(target)
        else:
            return target
        return None
