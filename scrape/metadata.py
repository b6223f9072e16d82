"""Page metadata from a parsed lxml document: canonical link, headings, OpenGraph, JSON-LD, and the
element text that extraction shares.

Done by hand with lxml rather than extruct (the fast syntaxes only): no extra parse of the page,
and a broken JSON-LD block is skipped, never fatal. Pure: no Django, no network.
"""

import json

import lxml.etree

from core.hrefs import absolute_http_url

MAX_HEADINGS = 100
MAX_JSON_LD_BYTES = 200_000  # of one block
MAX_JSON_LD_PAGE_BYTES = 500_000  # of all the blocks of one page kept
# Nesting of one block's lists and objects: real ones have a handful; hundreds make whatever reads
# the value later (storing it, rendering it) recurse past Python's limit.
MAX_JSON_LD_DEPTH = 32
# Compiled once: compiling an XPath costs more than running it on a page.
_CANONICAL = lxml.etree.XPath("//link[translate(@rel, 'CANONICAL', 'canonical')='canonical']/@href")
_HEADINGS = lxml.etree.XPath("//h1 | //h2 | //h3")
_META = lxml.etree.XPath("//meta[@property or @name]")
_JSON_LD = lxml.etree.XPath("//script[contains(translate(@type, 'LDJSON', 'ldjson'), 'ld+json')]")


def clean_text(text: str) -> str:
    return " ".join(text.split())  # str.split's whitespace is the regex \s, without the regex


def element_text(el) -> str:
    """el.text_content(), without its XPath evaluation for an element with no children (most links)."""
    return el.text_content() if len(el) else el.text or ""


def canonical_link(doc, base: str) -> str:
    hrefs = _CANONICAL(doc)
    return (absolute_http_url(base, str(hrefs[0])) or "") if hrefs else ""


def headings(doc) -> list[dict]:
    found = []
    for el in _HEADINGS(doc)[:MAX_HEADINGS]:
        text = clean_text(element_text(el))[:300]
        if text:
            found.append({"level": int(el.tag[1]), "text": text})
    return found


def opengraph(doc) -> dict:
    """og:* and twitter:* meta properties (first value of each)."""
    found: dict[str, str] = {}
    for el in _META(doc):
        key = (el.get("property") or el.get("name") or "").strip().lower()[:200]
        if key.startswith(("og:", "twitter:")) and el.get("content"):
            found.setdefault(key, el.get("content").strip()[:2000])
    return found


def json_ld(doc) -> list:
    """Every parseable application/ld+json block (objects and lists flattened one level); a block
    nested deeper than MAX_JSON_LD_DEPTH is skipped like a broken one, and so are blocks past the
    page's MAX_JSON_LD_PAGE_BYTES."""
    blocks, budget = [], MAX_JSON_LD_PAGE_BYTES
    for script in _JSON_LD(doc):
        raw = (script.text or "").strip()
        if not raw or len(raw) > min(MAX_JSON_LD_BYTES, budget):
            continue
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            continue
        if nests_within(value, MAX_JSON_LD_DEPTH):
            blocks.extend(value if isinstance(value, list) else [value])
            budget -= len(raw)
    return blocks


def nests_within(value, limit: int) -> bool:
    """Whether value nests at most `limit` lists and objects deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in children)
    return True
