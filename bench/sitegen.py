"""A deterministic benchmark site: N pages with link noise and traps. Same arguments, same bytes.

Its shape matches the optional shared benchmark's site, so the two can be compared: `/` plus
`/sNN/pIIIII.html` in sections, a spanning tree (page i links 8i+1..8i+8) so every page is
reachable, a fifth of the random links to hub pages, link spellings that must normalise to the same
URL, query-order variants that give extra canonical URLs, and traps (external `*.invalid` hosts,
404s, 301s and 2-hop chains, a redirect loop, `/private/` links that robots.txt disallows).
Media are small generated files: `<img>` on about 10% of pages (some shared) and a few `<video>`s.
The bench writes the site to files (bench/sitefiles.py); the tests serve site_files() from memory.
Nothing here imports Django.
"""

import random
from dataclasses import dataclass, field
from html import escape
from pathlib import PurePosixPath
from urllib.parse import urlencode

GENERATOR_VERSION = 1
SECTIONS = 40
BRANCHING = 8  # page i links pages 8i+1..8i+8: the spanning tree
HUB_COUNT = 100
PRIVATE_PREFIX = "/private/"
QUERY_VARIANT = (("lang", "en"), ("view", "print"))
WORD_TEXT = (
    "amber anchor batch beacon bridge broker buffer canal castle cedar cobalt copper crawler delta ember "
    "fetch forest frontier garden granite harbor index ivory lantern lease marble meadow mirror orbit "
    "parser pebble queue quiet rapid river robots scarlet signal silver socket spider summit thread "
    "timber token velvet violet willow worker"
)
WORDS = WORD_TEXT.split()
TYPES = {
    ".html": "text/html",
    ".xml": "application/xml",
    ".txt": "text/plain",
    ".jpg": "image/jpeg",
    ".mp4": "video/mp4",
}
EXTERNAL = (
    "http://external.invalid/",
    "https://www.external.invalid/news/{k}.html",
    "http://cdn.unreachable.invalid:8080/x/{k}",
    "https://social.invalid/share?u=page-{k}",
)


@dataclass
class PageSpec:
    path: str
    title: str
    text: str
    hrefs: list[str] = field(default_factory=list)
    media: list[tuple[str, str]] = field(default_factory=list)  # ("img" | "video", path)


@dataclass
class Site:
    n: int
    seed: int
    base_url: str
    sections: int
    pages: list[PageSpec]  # index i is page i; pages[0] is "/"
    private: list[PageSpec]
    redirects: dict[str, str]  # path -> Location (a path), served as 301
    missing: list[str]  # linked paths that do not exist
    media: dict[str, bytes]  # path -> body


def page_path(i: int, sections: int = SECTIONS) -> str:
    return "/" if i == 0 else f"/s{i % sections:02d}/p{i:05d}.html"


def site_plan(*, n: int, seed: int, base_url: str, sections: int = SECTIONS) -> Site:
    """The whole site in memory; every random choice comes from one Random(seed), in a fixed order."""
    rng = random.Random(seed)
    base = base_url.rstrip("/")
    redirects, missing, private_paths = _traps(rng, n, sections)
    site = Site(n, seed, base, sections, [], [], redirects, missing, {})
    hubs = list(range(1, min(n, HUB_COUNT + 1))) or [0]
    go_paths = sorted(p for p in redirects if p.startswith("/go/r"))
    every_redirect = sorted(redirects)
    for i in range(n):
        path = page_path(i, sections)
        spec = PageSpec(path, _title(rng, i), _sentence(rng, rng.randint(60, 160)))
        spec.hrefs = [_spell(rng, path, page_path(t, sections), base) for t in _targets(rng, i, n, hubs)]
        _add_traps(rng, spec, missing, private_paths, go_paths, every_redirect)
        site.pages.append(spec)
    _add_query_variants(rng, site)
    _add_media(rng, site)
    site.pages[0].hrefs += [private_paths[0], "/loop/a.html", missing[0], go_paths[0], "/go/chain-r00"]
    site.private = [_private_page(rng, k, private_paths, site) for k in range(len(private_paths))]
    return site


def site_at(site: Site, base_url: str) -> Site:
    """The same site served from another base URL: only the absolute spellings of its links change
    (the random choices do not depend on the base), so its ground truth is the same."""
    return site_plan(n=site.n, seed=site.seed, base_url=base_url, sections=site.sections)


def _traps(rng: random.Random, n: int, sections: int) -> tuple[dict[str, str], list[str], list[str]]:
    redirects = {f"/go/r{k:02d}": page_path(rng.randrange(1, max(2, n)), sections) for k in range(max(5, n // 200))}
    for k in range(0, len(redirects), 5):  # 2-hop chains
        redirects[f"/go/chain-r{k:02d}"] = f"/go/r{k:02d}"
    redirects |= {"/loop/a.html": "/loop/b.html", "/loop/b.html": "/loop/a.html", "/loop/self.html": "/loop/self.html"}
    missing = [f"/missing/m{k:02d}.html" for k in range(max(5, n // 200))]
    missing += [f"/s{k % sections:02d}/p9{k:05d}.html" for k in range(max(3, n // 1000))]
    private = [f"{PRIVATE_PREFIX}q{k:04d}.html" for k in range(max(10, n // 100))]
    return redirects, missing, private


def _targets(rng: random.Random, i: int, n: int, hubs: list[int]) -> list[int]:
    targets = list(range(BRANCHING * i + 1, min(n, BRANCHING * i + BRANCHING + 1)))
    wanted = rng.randint(10, 30)
    while len(targets) < wanted and n > 1:
        t = rng.choice(hubs) if rng.random() < 0.2 else rng.randrange(n)
        if t != i:
            targets.append(t)
    rng.shuffle(targets)
    return targets


def _spell(rng: random.Random, src: str, dst: str, base: str) -> str:
    """One of the many spellings of a link to dst that all canonicalise to it."""
    r = rng.random()
    if dst == "/":
        return base + "/" if r < 0.2 else "/"
    if r < 0.55:
        return dst
    if r < 0.70:
        return _relative(src, dst)
    if r < 0.80:
        return base + dst
    if r < 0.90:
        return f"{dst}#sec-{rng.randint(1, 5)}"
    if r < 0.95:
        return dst.replace("/p", "/./p", 1)
    return f"/s{rng.randrange(SECTIONS):02d}/..{dst}"


def _relative(src: str, dst: str) -> str:
    src_dir, (dst_dir, name) = src.rsplit("/", 1)[0], dst.rsplit("/", 1)
    if src_dir == dst_dir:
        return name
    return dst.lstrip("/") if src_dir == "" else "../" + dst.lstrip("/")


def _add_traps(rng, spec: PageSpec, missing, private_paths, go_paths, every_redirect) -> None:
    if rng.random() < 0.3:  # the same targets again, spelled differently
        for href in rng.sample(spec.hrefs, min(len(spec.hrefs), rng.randint(1, 3))):
            spec.hrefs.append(href.split("#")[0] + rng.choice(["#top", "#", ""]))
    if rng.random() < 0.02:
        spec.hrefs.append(rng.choice(missing))
    if rng.random() < 0.015:
        spec.hrefs.append(rng.choice(every_redirect if rng.random() < 0.3 else go_paths))
    if rng.random() < 0.01:
        spec.hrefs.append(rng.choice(private_paths))
    spec.hrefs += [rng.choice(EXTERNAL).format(k=rng.randrange(1000)) for _ in range(rng.randint(0, 3))]


def _add_query_variants(rng: random.Random, site: Site) -> None:
    """Pages 7, 57, 107, ... are linked with ?lang=en&view=print in both orders: one extra canonical URL each."""
    for i in range(7, site.n, 50):
        path = page_path(i, site.sections)
        for order in (QUERY_VARIANT, QUERY_VARIANT[::-1]):
            site.pages[rng.randrange(site.n)].hrefs.append(f"{path}?{urlencode(order)}")
        if rng.random() < 0.5:
            site.pages[rng.randrange(site.n)].hrefs.append(f"{path}?{urlencode(QUERY_VARIANT[::-1])}#x")


def _add_media(rng: random.Random, site: Site) -> None:
    content = range(1, site.n) if site.n > 1 else range(site.n)
    with_img = sorted(rng.sample(content, max(1, round(len(content) * 0.10))))
    with_video = sorted(rng.sample(content, max(2, site.n // 500) if len(content) >= 2 else 1))
    pool = max(1, int(len(with_img) * 0.9))  # fewer images than pages showing one: some are shared
    for i in with_img:
        site.pages[i].media.append(("img", f"/media/img/i{rng.randrange(pool):04d}.jpg"))
    for k, i in enumerate(with_video):
        site.pages[i].media.append(("video", f"/media/video/v{k:03d}.mp4"))
    for path in sorted({src for page in site.pages for _, src in page.media}):
        site.media[path] = _media_bytes(rng, path)


def _media_bytes(rng: random.Random, path: str) -> bytes:
    if path.endswith(".jpg"):
        return b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + rng.randbytes(rng.randint(1000, 6000)) + b"\xff\xd9"
    return b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + rng.randbytes(rng.randint(4000, 12000))


def _private_page(rng: random.Random, k: int, paths: list[str], site: Site) -> PageSpec:
    """Disallowed pages still link on (to content and to the next private page), with their own image."""
    image = f"/media/img/private{k:04d}.jpg"
    site.media[image] = _media_bytes(rng, image)
    hrefs = [page_path(rng.randrange(site.n), site.sections) for _ in range(10)]
    hrefs.append(paths[(k + 1) % len(paths)])
    return PageSpec(paths[k], f"Private {k}", _sentence(rng, 40), hrefs, [("img", image)])


def _title(rng: random.Random, i: int) -> str:
    return "Bench Site Home" if i == 0 else f"Page {i}: " + " ".join(rng.choice(WORDS) for _ in range(3)).title()


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def page_html(spec: PageSpec) -> str:
    links = "\n".join(f'      <li><a href="{escape(h)}">link {k}</a></li>' for k, h in enumerate(spec.hrefs))
    media = "".join(
        f'    <p><img src="{src}" alt="figure" width="320" height="240"></p>\n'
        if kind == "img"
        else f'    <p><video controls width="320" src="{src}">no video</video></p>\n'
        for kind, src in spec.media
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n  <meta charset="utf-8">\n'
        f"  <title>{escape(spec.title)}</title>\n</head>\n<body>\n"
        '  <header><a href="/">Home</a> | <a href="#main">skip</a></header>\n'
        f'  <main id="main">\n    <h1>{escape(spec.title)}</h1>\n    <p class="text">{escape(spec.text)}</p>\n'
        f'{media}    <ul class="links">\n{links}\n    </ul>\n  </main>\n'
        '  <footer><a href="mailto:webmaster@example.invalid">contact</a> '
        '<a href="javascript:void(0)">print</a></footer>\n</body>\n</html>\n'
    )


def robots_txt(site: Site, *, sitemap: bool = True) -> str:
    rules = f"User-agent: *\nDisallow: {PRIVATE_PREFIX}\n"
    return rules + f"\nSitemap: {site.base_url}/sitemap.xml\n" if sitemap else rules


def sitemap_xml(site: Site) -> str:
    urls = "".join(f"  <url><loc>{site.base_url}{page.path}</loc></url>\n" for page in site.pages)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"{urls}</urlset>\n"
    )


def site_files(site: Site, *, sitemap: bool = True) -> dict[str, tuple[int, dict, bytes]]:
    """Every response the site serves, by path: (status, headers, body); 404 for any other path.
    Without `sitemap`, robots.txt names none and there is no /sitemap.xml: links are the only way in."""
    html = {"Content-Type": TYPES[".html"]}
    files = {page.path: (200, html, page_html(page).encode()) for page in site.pages + site.private}
    files |= {path: (200, {"Content-Type": content_type(path)}, body) for path, body in site.media.items()}
    files["/robots.txt"] = (200, {"Content-Type": TYPES[".txt"]}, robots_txt(site, sitemap=sitemap).encode())
    if sitemap:
        files["/sitemap.xml"] = (200, {"Content-Type": TYPES[".xml"]}, sitemap_xml(site).encode())
    for path, target in site.redirects.items():
        files[path] = (301, {"Location": target, **html}, b"<h1>301</h1>\n")
    return files


def content_type(path: str) -> str:
    return TYPES.get(PurePosixPath(path).suffix, "application/octet-stream")
