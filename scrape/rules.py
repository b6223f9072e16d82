"""Declarative per-project extraction rules (fields, follow/deny, id scraper). Pure: no Django, no network.

A rule set is JSON-compatible data kept in a JSONField; see tests/scrape/test_rules.py for full examples:
{"name", "url_patterns": [regex], "item_selector": css, "fields": {name: field}, "required": [name],
 "follow": [regex], "deny": [regex], "id_regex": regex, "download_url_fmt": "https://.../{id}.zip"}
A field has exactly one of css / xpath (relative to the item element) and optionally attr ("text", "html"
or an attribute name), absolute, regex (group 1, else the whole match), type (str, int, float, bool) and
many; values go through absolute, regex and type in that order, and a value they reject is missing.
Items are of kind rule:<the RuleSet's own name>; the spec's "name", when given, overrides it.
"render" (never, always, auto) and "actions" say how the pages it applies to are fetched (see
scrape/render_plan.py and core/net/page_actions.py).
"""

import hashlib
import json
import math
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import lxml.cssselect
import lxml.etree
import lxml.html

from core.hrefs import absolute_http_url
from core.patterns import NESTED_REPEATS, UserPattern, compile_error, nests_repeats

from .render_plan import RenderSettingError, RoutePlan, checked_actions, render_mode

SPEC_KEYS = frozenset(
    {
        "name",
        "url_patterns",
        "item_selector",
        "fields",
        "required",
        "follow",
        "deny",
        "id_regex",
        "download_url_fmt",
        "priority",
        "render",
        "actions",
    }
)
FIELD_KEYS = frozenset({"css", "xpath", "attr", "regex", "type", "many", "absolute"})
TYPES = ("str", "int", "float", "bool")
_TRUE = frozenset({"true", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "no", "n", "off", "0"})
_SPACE = re.compile(r"\s+")
_PROBE = lxml.html.fromstring("<p></p>")  # evaluating once finds unknown functions and variables


class RuleError(ValueError):
    """A rule set that cannot be used; the message names the offending key and the problem."""


@dataclass(frozen=True)
class FieldRule:
    name: str
    selector: lxml.etree.XPath
    attr: str = "text"
    regex: UserPattern | None = None  # every regex of a rule set is matched with a time limit
    type: str = "str"
    many: bool = False
    absolute: bool = False


@dataclass
class RuleResult:
    items: list[dict[str, Any]] = field(default_factory=list)
    errors: list[list[str]] = field(default_factory=list)  # errors[i] belongs to items[i]
    follow: list[str] = field(default_factory=list)
    downloads: list[str] = field(default_factory=list)
    rules_version: str = ""


@dataclass(frozen=True)
class CompiledRules:
    name: str  # its items are of kind rule:<name>: the spec's "name" if it has one, else the rule set's
    version: str
    url_patterns: tuple[UserPattern, ...] = ()
    item_selector: lxml.etree.XPath | None = None
    fields: tuple[FieldRule, ...] = ()
    required: tuple[str, ...] = ()
    follow_patterns: tuple[UserPattern, ...] = ()
    deny_patterns: tuple[UserPattern, ...] = ()
    id_regex: UserPattern | None = None
    download_url_fmt: str = ""
    priority: int = 0  # of the links this rule set follows: higher is fetched sooner
    render: str | None = None  # never, always or auto for the pages it applies to (None: not set here)
    actions: tuple = ()  # page actions when they are rendered (core.net.page_actions)

    @property
    def kind(self) -> str:
        """The kind of its items (Item.kind)."""
        return f"rule:{self.name}"

    @property
    def render_plan(self) -> RoutePlan | None:
        """Its render setting as a route's (its key is its items' kind), or None when it sets none."""
        return None if self.render is None else RoutePlan(self.render, self.kind, self.actions)

    def applies_to(self, url: str) -> bool:
        return not self.url_patterns or any(p.search(url) for p in self.url_patterns)

    def extract(self, html: bytes | str, url: str) -> RuleResult:
        """Items, per-item errors, links to follow and download URLs of one page. Never raises on bad HTML."""
        doc = parse_html(html)
        base = _base_url(doc, url)
        result = RuleResult(rules_version=self.version)
        for element in self._item_elements(doc):
            item, errors = self._extract_item(element, base)
            result.items.append(item)
            result.errors.append(errors)
        result.follow = self._follow(doc, base)
        result.downloads = self._downloads(doc, base)
        return result

    def _item_elements(self, doc) -> list:
        if not self.fields:
            return []
        if self.item_selector is None:
            return [doc]
        return [el for el in self.item_selector(doc) if lxml.etree.iselement(el)]

    def _extract_item(self, element, base: str) -> tuple[dict[str, Any], list[str]]:
        item, errors, failed = {}, [], set()
        for rule in self.fields:
            item[rule.name], field_errors = _field_value(rule, element, base)
            errors.extend(field_errors)
            if field_errors:  # already explained: not also reported as missing
                failed.add(rule.name)
        for name in self.required:
            if item[name] in (None, []) and name not in failed:
                errors.append(f"missing required field {name}")
        return item, errors

    def _follow(self, doc, base: str) -> list[str]:
        urls: dict[str, None] = {}
        for href in doc.xpath("//a/@href | //area/@href"):
            url = absolute_http_url(base, str(href))
            if url and url not in urls and self._may_follow(url):
                urls[url] = None
        return list(urls)

    def _may_follow(self, url: str) -> bool:
        if any(p.search(url) for p in self.deny_patterns):
            return False
        return not self.follow_patterns or any(p.search(url) for p in self.follow_patterns)

    def _downloads(self, doc, base: str) -> list[str]:
        if self.id_regex is None:
            return []
        ids: dict[str, None] = {}
        for text in _hrefs_and_texts(doc):
            for match in self.id_regex.finditer(text):
                if ident := _matched(self.id_regex, match):
                    ids.setdefault(ident)
        urls: dict[str, None] = {}
        for ident in ids:
            # Quoted so an id cannot add a query or fragment; "/" and "%" kept for path-like, encoded ids.
            url = absolute_http_url(base, self.download_url_fmt.format(id=quote(ident, safe="/%")))
            if url:
                urls.setdefault(url)
        return list(urls)


def item_kind(rule_set_name: str, spec: Any) -> str:
    """The kind of a rule set's items: rule:<its own name>, unless the spec's "name" overrides it."""
    return f"rule:{_items_name(rule_set_name, spec)}"


def _items_name(rule_set_name: str, spec: Any) -> str:
    override = spec.get("name") if isinstance(spec, dict) else None
    return (override.strip() if isinstance(override, str) else "") or rule_set_name


def compile_rules(spec: dict, *, name: str = "") -> CompiledRules:
    """Validate a rule set and compile its selectors and regexes; RuleError names the first problem.
    `name` is the rule set's own name: its items are of kind rule:<name> (see item_kind)."""
    _check_keys("rules", spec, SPEC_KEYS)
    fields = _dict("fields", spec.get("fields", {}))
    compiled_fields = tuple(_compile_field(name, rule) for name, rule in fields.items())
    required = tuple(_strings("required", spec.get("required", [])))
    for field_name in required:  # not `name`: that is the rule set's, which names its items
        if field_name not in fields:
            raise RuleError(f"required: {field_name!r} is not one of the fields")
    id_regex, download_fmt = spec.get("id_regex"), spec.get("download_url_fmt")
    if (id_regex is None) != (download_fmt is None):
        raise RuleError("id_regex and download_url_fmt: give both or neither")
    item_selector = spec.get("item_selector")
    return CompiledRules(
        name=_items_name(name, {"name": _string("name", spec.get("name", ""), allow_empty=True)}),
        version=rules_version(spec),
        url_patterns=_regexes("url_patterns", spec.get("url_patterns", [])),
        item_selector=None if item_selector is None else compile_css("item_selector", item_selector),
        fields=compiled_fields,
        required=required,
        follow_patterns=_regexes("follow", spec.get("follow", [])),
        deny_patterns=_regexes("deny", spec.get("deny", [])),
        id_regex=None if id_regex is None else _regex("id_regex", id_regex),
        download_url_fmt="" if download_fmt is None else _download_fmt(download_fmt),
        priority=_priority(spec.get("priority", 0)),
        **_render_setting(spec),
    )


def _render_setting(spec: dict) -> dict:
    try:
        return {"render": render_mode(spec.get("render")), "actions": checked_actions(spec.get("actions"))}
    except RenderSettingError as exc:
        raise RuleError(str(exc)) from None


def _priority(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -1000 <= value <= 1000:
        raise RuleError(f"priority: must be a whole number from -1000 to 1000, not {value!r}")
    return value


def rules_version(spec: dict) -> str:
    """First 12 hex digits of the SHA-256 of the rule set's canonical JSON: the same rules, the same version."""
    try:
        canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise RuleError(f"rules: not JSON-compatible ({exc})") from exc
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _compile_field(name: Any, rule: Any) -> FieldRule:
    where = f"fields.{name}"
    if not isinstance(name, str) or not name:
        raise RuleError(f"{where}: a field name must be a non-empty string")
    _check_keys(where, rule, FIELD_KEYS)
    if ("css" in rule) == ("xpath" in rule):
        raise RuleError(f"{where}: give exactly one of css or xpath")
    if "css" in rule:
        selector = compile_css(f"{where}.css", rule["css"])
    else:
        selector = compile_xpath(f"{where}.xpath", rule["xpath"])
    kind = rule.get("type", "str")
    if kind not in TYPES:
        raise RuleError(f"{where}.type: {kind!r} is not one of {', '.join(TYPES)}")
    regex = rule.get("regex")
    return FieldRule(
        name=name,
        selector=selector,
        attr=_string(f"{where}.attr", rule.get("attr", "text")),
        regex=None if regex is None else _regex(f"{where}.regex", regex),
        type=kind,
        many=_bool(f"{where}.many", rule.get("many", False)),
        absolute=_bool(f"{where}.absolute", rule.get("absolute", False)),
    )


def _check_keys(where: str, value: Any, allowed: frozenset[str]) -> None:
    _dict(where, value)
    unknown = sorted(str(key) for key in value if key not in allowed)
    if unknown:
        raise RuleError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")


def _dict(where: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise RuleError(f"{where}: must be an object, not {type(value).__name__}")
    return value


def _string(where: str, value: Any, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or not (value.strip() or allow_empty):
        raise RuleError(f"{where}: must be a non-empty string, not {value!r}")
    return value


def _strings(where: str, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise RuleError(f"{where}: must be a list of strings, not {type(value).__name__}")
    return [_string(f"{where}[{i}]", item) for i, item in enumerate(value)]


def _bool(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise RuleError(f"{where}: must be true or false, not {value!r}")
    return value


def _regex(where: str, pattern: Any) -> UserPattern:
    if error := compile_error(_string(where, pattern)):
        raise RuleError(f"{where}: invalid regular expression {pattern!r}: {error}")
    if nests_repeats(pattern):
        raise RuleError(f"{where}: {pattern!r} {NESTED_REPEATS}")
    return UserPattern(pattern)


def _regexes(where: str, patterns: Any) -> tuple[UserPattern, ...]:
    return tuple(_regex(f"{where}[{i}]", pattern) for i, pattern in enumerate(_strings(where, patterns)))


def compile_css(where: str, css: Any) -> lxml.etree.XPath:
    try:
        return lxml.cssselect.CSSSelector(_string(where, css), translator="html")
    except lxml.cssselect.SelectorError as exc:
        raise RuleError(f"{where}: invalid CSS selector {css!r}: {exc}") from exc


def compile_xpath(where: str, expression: Any) -> lxml.etree.XPath:
    try:
        compiled = lxml.etree.XPath(_string(where, expression))
        compiled(_PROBE)
    except lxml.etree.XPathError as exc:
        raise RuleError(f"{where}: invalid XPath {expression!r}: {exc}") from exc
    return compiled


def _download_fmt(fmt: Any) -> str:
    fmt = _string("download_url_fmt", fmt)
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(fmt) if name is not None]
        if others := [name for name in names if name != "id"]:
            raise RuleError(f"download_url_fmt: unknown placeholder {{{others[0]}}}; only {{id}} is allowed")
        if not names:
            raise RuleError("download_url_fmt: must contain the {id} placeholder")
        fmt.format(id="1")
    except (ValueError, KeyError, IndexError, AttributeError) as exc:
        if isinstance(exc, RuleError):
            raise
        raise RuleError(f"download_url_fmt: invalid format {fmt!r}: {exc}") from exc
    return fmt


def parse_html(html: bytes | str):
    """lxml in recover mode; text is handed over as UTF-8 so an encoding declaration inside it is ignored."""
    is_text = isinstance(html, str)
    body = html.encode("utf-8", "replace") if is_text else bytes(html)
    parser = lxml.html.HTMLParser(encoding="utf-8" if is_text else None, remove_comments=True)
    try:
        return lxml.html.document_fromstring(body, parser=parser)
    except (lxml.etree.LxmlError, ValueError, LookupError):  # "Document is empty", unknown encodings
        return lxml.html.document_fromstring("<html><body></body></html>")


def _base_url(doc, page_url: str) -> str:
    hrefs = doc.xpath("//base/@href")
    return (absolute_http_url(page_url, str(hrefs[0])) if hrefs else None) or page_url


def _hrefs_and_texts(doc) -> Iterator[str]:
    """Every href and text node in document order, so ids come in order of first appearance. Walked, not
    the XPath "//@href | //text()": libxml2 takes seconds to order that union on a large page."""
    for event, element in lxml.etree.iterwalk(doc, events=("start", "end")):
        if event == "start" and isinstance(element.tag, str):  # an element, not a processing instruction
            yield from filter(None, (element.get("href"), element.text))
        elif event == "end" and element is not doc and element.tail:
            yield element.tail


def _field_value(rule: FieldRule, element, base: str) -> tuple[Any, list[str]]:
    try:
        found = rule.selector(element)
    except lxml.etree.XPathError as exc:
        return ([] if rule.many else None), [f"{rule.name}: selector failed: {exc}"]
    timeouts = rule.regex.timeouts if rule.regex else 0
    raws = [raw for raw in (_refine(rule, text, base) for text in match_texts(found, rule.attr)) if raw]
    values, errors = [], []
    if rule.regex and (rule.regex.timeouts > timeouts or rule.regex.given_up):
        errors.append(f"{rule.name}: regex {rule.regex.pattern!r} timed out (catastrophic backtracking): no match")
    for raw in raws if rule.many else raws[:1]:
        try:
            values.append(_convert(raw, rule.type))
        except ValueError:
            errors.append(f"{rule.name}: cannot convert {raw[:60]!r} to {rule.type}")
    return (values if rule.many else next(iter(values), None)), errors


def match_texts(found: Any, attr: str) -> list[str]:
    """XPath results as strings: elements through attr, strings as they are, numbers and booleans printed."""
    texts = []
    for value in found if isinstance(found, list) else [found]:
        if lxml.etree.iselement(value):
            texts.append(_element_text(value, attr))
        elif isinstance(value, bool):
            texts.append("true" if value else "false")
        elif isinstance(value, float):
            texts.append(str(int(value)) if value.is_integer() else str(value))
        else:
            texts.append(str(value))
    return texts


def _element_text(element, attr: str) -> str:
    if attr == "text":
        return _SPACE.sub(" ", element.xpath("string()")).strip()
    if attr == "html":
        return lxml.html.tostring(element, encoding="unicode", with_tail=False)
    return element.get(attr) or ""


def _refine(rule: FieldRule, text: str, base: str) -> str | None:
    text = text.strip()
    if text and rule.absolute:
        text = absolute_http_url(base, text) or ""
    if text and rule.regex is not None:
        match = rule.regex.search(text)
        text = _matched(rule.regex, match) if match else ""
    return text or None


def _matched(regex: UserPattern, match) -> str:
    return (match.group(1) if regex.groups else match.group(0)) or ""


def _convert(raw: str, kind: str) -> Any:
    if kind == "int":
        return int(raw)
    if kind == "float":
        number = float(raw)
        if not math.isfinite(number):  # NaN and infinities are not JSON (PostgreSQL's jsonb refuses them)
            raise ValueError(raw)
        return number
    if kind == "bool":
        lowered = raw.strip().lower()
        if lowered not in _TRUE | _FALSE:
            raise ValueError(raw)
        return lowered in _TRUE
    return raw
