"""Block detection: whether an answer is a block page (a captcha, "access denied", a bot challenge)
instead of the page asked for. Pure: no Django. The fetch stage asks `block_verdict` of every
answer, so the common case costs a slice of the body lowered and a few substring searches; a
selector rule (the only one that parses) runs only when a project sets one.

A rule holds when all its conditions hold: `status` (a code or a list), `regex` (over the first
scan bytes of the body), `title` (a regex over the <title>), `selector` (a CSS selector that
matches, or with "absent": true one that does not), `shorter_than` (a fraction of the host's
usual body length). The built-in rules (BUILT_IN) catch the common block pages."""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import lxml.cssselect
import lxml.etree
import lxml.html

from core.patterns import UserPattern, pattern_problem

if TYPE_CHECKING:
    from core.net.client import FetchResponse

SCAN_BYTES = 16 * 1024  # the first bytes of a body that the markers and regex rules look at
SAMPLE_CHARS = 2000  # the evidence kept of a blocked answer's body
CONDITIONS = ("status", "regex", "title", "selector", "shorter_than")
RULE_KEYS = frozenset({"name", "absent", *CONDITIONS})

# Markers of the bot-protection vendors' challenge and block pages (lowercase), whatever the
# status: Cloudflare's challenge, Akamai's reference to its error host (also written with
# entities), Imperva's incident, PerimeterX's and DataDome's captchas. None of them is on the
# pages these vendors serve normally (Cloudflare's /cdn-cgi/challenge-platform/ script is).
# Long needles, and few: each is one substring search of the scanned bytes.
CHALLENGE_MARKERS = (
    b"_cf_chl_opt",
    b"errors.edgesuite.net",
    b"errors&#46;edgesuite&#46;net",
    b"incapsula incident id",
    b"px-captcha",
    b"captcha-delivery.com",
)
# Titles of block pages (lowercase); "access denied" only on a 200: a 403 of that name is an
# ordinary refusal (its page fails), unless a vendor's markers are on it.
BLOCK_TITLES = (
    "captcha",
    "are you a robot",
    "are you human",
    "verify you are human",
    "human verification",
    "just a moment",
    "attention required",
    "pardon our interruption",
    "request blocked",
    "bot check",
)
DENIED_TITLES = ("access denied", "access to this page has been denied", "forbidden")
# Sentences of captcha pages (lowercase), in the body: "verify (that) you are human", Amazon's
# and Google's.
CAPTCHA_TEXTS = (b"you are human", b"are you a robot", b"enter the characters you see", b"unusual traffic from your")
TEXT_TYPES = ("", "text/html", "application/xhtml+xml", "text/plain")
# Block pages are small: a block title or a captcha sentence counts on a body under this size only
# (an article about captchas is no block).
SMALL_BODY = 32 * 1024


@dataclass(frozen=True)
class Blocked:
    """An answer classed blocked: the rule that matched, and what matched, in words."""

    rule: str
    reason: str


@dataclass(frozen=True)
class Answer:
    """What the rules look at of one response, each part made once, when a rule first asks."""

    response: "FetchResponse"
    scan_bytes: int
    usual_length: int | None
    _made: dict = field(default_factory=dict, compare=False)

    def made(self, name: str, make: Callable[[], object]):
        if name not in self._made:
            self._made[name] = make()
        return self._made[name]

    @property
    def lowered(self) -> bytes:
        return self.made("lowered", lambda: self.response.body[: self.scan_bytes].lower())

    @property
    def text(self) -> str:
        return self.made("text", lambda: self.response.body[: self.scan_bytes].decode("utf-8", "replace"))

    @property
    def title(self) -> str:
        return self.made("title", lambda: title_of(self.response.body[: self.scan_bytes], self.lowered))

    @property
    def tree(self):
        return self.made("tree", lambda: _parsed(self.response.body))


@dataclass(frozen=True)
class BlockRule:
    """A user's rule, compiled. A condition left unset always holds; a rule sets at least one."""

    name: str
    statuses: frozenset[int] = frozenset()
    regex: UserPattern | None = None
    title: UserPattern | None = None
    selector: lxml.cssselect.CSSSelector | None = None
    absent: bool = False
    shorter_than: float | None = None

    def matches(self, answer: Answer) -> str | None:
        """What matched, in words, when every condition holds; else None."""
        said = []
        if self.statuses:
            if answer.response.status_code not in self.statuses:
                return None
            said.append(f"status {answer.response.status_code}")
        if self.shorter_than is not None:
            if not _shorter(answer, self.shorter_than):
                return None
            said.append(f"{len(answer.response.body)} bytes against the host's usual {answer.usual_length}")
        for what, pattern, text in (("body", self.regex, "text"), ("title", self.title, "title")):
            if pattern is not None:
                if pattern.search(getattr(answer, text)) is None:
                    return None
                said.append(f"{what} matches {pattern.pattern!r}")
        if self.selector is not None:
            if _selects(self.selector, answer.tree) == self.absent:
                return None
            said.append(f"selector {self.selector.css!r} {'absent' if self.absent else 'found'}")
        return ", ".join(said)


@dataclass(frozen=True)
class BlockRules:
    """A project's rules: the built-in ones (when on), then its own."""

    own: tuple[BlockRule, ...] = ()
    built_in: bool = True
    scan_bytes: int = SCAN_BYTES

    @property
    def wants_usual_length(self) -> bool:
        return any(rule.shorter_than is not None for rule in self.own)


def block_verdict(rules: BlockRules, response: "FetchResponse", *, usual_length: int | None = None) -> Blocked | None:
    """Whether `response` is a block page, by the first rule that matches (the built-in ones first);
    None for an answer that is not (or no answer at all, a redirect, a 304)."""
    status = response.status_code
    if status is None or 300 <= status < 400:
        return None
    answer = Answer(response, rules.scan_bytes, usual_length)
    if rules.built_in and response.content_type in TEXT_TYPES and (found := built_in_verdict(answer)):
        return found
    for rule in rules.own:
        if (reason := rule.matches(answer)) is not None:
            return Blocked(rule.name, reason)
    return None


def built_in_verdict(answer: Answer) -> Blocked | None:
    """The common block pages: a vendor's challenge; on a small page, a block page's title or a
    captcha's sentence."""
    lowered = answer.lowered
    if marker := _first_in(lowered, CHALLENGE_MARKERS):
        return Blocked("challenge", f"a bot challenge's marker {marker.decode()!r}")
    if len(answer.response.body) >= SMALL_BODY:
        return None
    title = answer.title.lower()
    titles = BLOCK_TITLES + (DENIED_TITLES if answer.response.status_code == 200 else ())
    for words in titles:
        if words in title:
            return Blocked("block title", f"title {answer.title[:100]!r}")
    if words := _first_in(lowered, CAPTCHA_TEXTS):
        return Blocked("captcha", f"the body says {words.decode()!r}")
    return None


def _first_in(lowered: bytes, needles: tuple[bytes, ...]) -> bytes | None:
    for needle in needles:
        if needle in lowered:
            return needle
    return None


def title_of(head: bytes, lowered: bytes | None = None) -> str:
    """The text of the first <title> in `head` (`lowered`: head.lower(), when made), without parsing
    the page; or ""."""
    lowered = head.lower() if lowered is None else lowered
    start = lowered.find(b"<title")
    if start < 0:
        return ""
    start = lowered.find(b">", start)
    end = lowered.find(b"</title", start)
    if start < 0 or end < 0:
        return ""
    return " ".join(head[start + 1 : end].decode("utf-8", "replace").split())


def _shorter(answer: Answer, fraction: float) -> bool:
    usual = answer.usual_length
    return bool(usual) and len(answer.response.body) < fraction * usual


def _parsed(body: bytes):
    try:
        return lxml.html.document_fromstring(body)
    except (lxml.etree.ParserError, ValueError):
        return None


def _selects(selector: lxml.cssselect.CSSSelector, tree) -> bool:
    return tree is not None and bool(selector(tree))


def block_sample(response: "FetchResponse", chars: int = SAMPLE_CHARS) -> str:
    """The start of a blocked answer's body, as evidence."""
    return response.body[: chars * 4].decode("utf-8", "replace")[:chars]


# --- the rules as users write them (a JSON list of objects) ------------------------------------------


def block_rules(specs: list[dict], *, built_in: bool = True, scan_bytes: int = SCAN_BYTES) -> BlockRules:
    """A project's rules, compiled (the specs are valid: rules_problems says so first)."""
    return BlockRules(tuple(_rule(i, spec) for i, spec in enumerate(specs, start=1)), built_in, scan_bytes)


def _rule(number: int, spec: dict) -> BlockRule:
    status = spec.get("status")
    statuses = frozenset(status if isinstance(status, list) else [status] if status is not None else [])
    css = spec.get("selector")
    return BlockRule(
        name=spec.get("name") or f"rule {number}",
        statuses=statuses,
        regex=UserPattern(spec["regex"]) if spec.get("regex") else None,
        title=UserPattern(spec["title"]) if spec.get("title") else None,
        selector=lxml.cssselect.CSSSelector(css, translator="html") if css else None,
        absent=bool(spec.get("absent")),
        shorter_than=spec.get("shorter_than"),
    )


def rules_problems(specs) -> list[str]:
    """What is wrong with a project's block rules, one line per problem (empty: nothing)."""
    if not isinstance(specs, list):
        return ["must be a JSON list of rules (objects)"]
    problems = []
    for number, spec in enumerate(specs, start=1):
        problems += [f"rule {number}: {why}" for why in _spec_problems(spec)]
    return problems


def _spec_problems(spec) -> list[str]:
    if not isinstance(spec, dict):
        return ['must be an object, like {"title": "Captcha"}']
    problems = [f"unknown key {key!r} (known: {', '.join(sorted(RULE_KEYS))})" for key in spec if key not in RULE_KEYS]
    if not any(spec.get(key) not in (None, "", []) for key in CONDITIONS):
        problems.append(f"needs at least one of {', '.join(CONDITIONS)}")
    for key in ("regex", "title"):
        if spec.get(key) is not None:
            problems += _pattern_problems(key, spec[key])
    problems += _status_problems(spec.get("status"))
    problems += _selector_problems(spec.get("selector"))
    fraction = spec.get("shorter_than")
    if fraction is not None and (isinstance(fraction, bool) or not isinstance(fraction, int | float)):
        problems.append("shorter_than must be a fraction of the usual length, like 0.3")
    elif fraction is not None and not 0 < fraction <= 1:
        problems.append("shorter_than must be above 0 and at most 1")
    if not isinstance(spec.get("name", ""), str):
        problems.append("name must be a string")
    return problems


def _pattern_problems(key: str, pattern) -> list[str]:
    if not isinstance(pattern, str):
        return [f"{key} must be a regular expression (a string)"]
    why = pattern_problem(pattern)
    return [f"{key} {pattern[:100]!r} {why}"] if why else []


def _status_problems(status) -> list[str]:
    codes = status if isinstance(status, list) else [] if status is None else [status]
    if any(isinstance(c, bool) or not isinstance(c, int) or not 100 <= c <= 599 for c in codes):
        return ["status must be an HTTP status code or a list of them, like 403 or [403, 429]"]
    return []


def _selector_problems(css) -> list[str]:
    if css is None:
        return []
    if not isinstance(css, str):
        return ["selector must be a CSS selector (a string)"]
    try:
        lxml.cssselect.CSSSelector(css, translator="html")
    except lxml.cssselect.SelectorError as exc:
        return [f"selector {css[:100]!r} is not a CSS selector: {exc}"]
    return []
