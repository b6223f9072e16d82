"""Page metadata from a parsed lxml document: canonical link, headings, OpenGraph and JSON-LD.

Done by hand with lxml rather than extruct (the fast syntaxes only): no extra parse of the page,
and a broken JSON-LD block is skipped, never fatal. Pure: no Django, no network.
"""

import json

from .extractors import _clean as clean
from .extractors import absolute_http_url

MAX_HEADINGS = 100
MAX_JSON_LD_BYTES = 200_000


def canonical_link(doc, base: str) -> str:
    hrefs = doc.xpath("//link[translate(@rel, 'CANONICAL', 'canonical')='canonical']/@href")
    return (absolute_http_url(base, str(hrefs[0])) or "") if hrefs else ""


def headings(doc) -> list[dict]:
    found = []
    for el in doc.xpath("//h1 | //h2 | //h3")[:MAX_HEADINGS]:
        text = clean(el.text_content())[:300]
        if text:
            found.append({"level": int(el.tag[1]), "text": text})
    return found


def opengraph(doc) -> dict:
    """og:* and twitter:* meta properties (first value of each)."""
    found: dict[str, str] = {}
    for el in doc.xpath("//meta[@property or @name]"):
        key = (el.get("property") or el.get("name") or "").strip().lower()
        if key.startswith(("og:", "twitter:")) and el.get("content"):
            found.setdefault(key, el.get("content").strip()[:2000])
    return found


def json_ld(doc) -> list:
    """Every parseable application/ld+json block (objects and lists flattened one level)."""
    blocks = []
    for script in doc.xpath("//script[contains(translate(@type, 'LDJSON', 'ldjson'), 'ld+json')]"):
        raw = (script.text or "").strip()
        if not raw or len(raw) > MAX_JSON_LD_BYTES:
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        blocks.extend(value if isinstance(value, list) else [value])
    return blocks
