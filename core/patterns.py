"""Regular expressions that users type (scope allow/deny, media page patterns, extraction rules), matched
with a time limit so that a catastrophic pattern on a hostile page gives up instead of holding a worker
(ReDoS). Pure: no Django; crawl/apps.py sets MATCH_TIMEOUT from CRAWL_REGEX_TIMEOUT."""

import logging
import re
from collections.abc import Iterator
from re import _constants as sre  # the stdlib's own parser and its opcodes, read by _nests_repeats
from re import _parser

import regex

log = logging.getLogger("crawlhub.patterns")
MATCH_TIMEOUT = 0.2  # seconds one search (or one finditer) may take before it counts as no match
# A pattern that gave up this often is not run again by this process (its scope or rule set, rebuilt,
# starts afresh): a page of 5,000 hostile links then costs seconds, not 5,000 timeouts.
MAX_TIMEOUTS = 3
_REPEATS = frozenset({sre.MAX_REPEAT, sre.MIN_REPEAT})  # possessive repeats and atomic groups never backtrack
_ONE_CHARACTER = frozenset({sre.LITERAL, sre.NOT_LITERAL, sre.IN, sre.ANY})
NESTED_REPEATS = (
    "repeats a group that itself repeats with nothing to tell the iterations apart, like (a+)+ or (\\w+\\s?)*: "
    "matching can take exponential time (catastrophic backtracking); write a+ for (a+)+, or put a "
    "separator in the group as in (/[a-z]+)+"
)


class UserPattern:
    """A user's pattern, compiled by the `regex` module. search and finditer give up after
    MATCH_TIMEOUT seconds, log it and count as no match; after MAX_TIMEOUTS give-ups the pattern is
    no longer run at all."""

    __slots__ = ("_compiled", "pattern", "timeouts")

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.timeouts = 0
        self._compiled = regex.compile(pattern)

    def __repr__(self) -> str:
        return f"UserPattern({self.pattern!r})"

    @property
    def groups(self) -> int:
        return self._compiled.groups

    @property
    def given_up(self) -> bool:
        return self.timeouts >= MAX_TIMEOUTS

    def search(self, text: str) -> "regex.Match | None":
        if self.timeouts >= MAX_TIMEOUTS:
            return None
        try:
            return self._compiled.search(text, timeout=MATCH_TIMEOUT)
        except TimeoutError:
            self._gave_up(text)
            return None

    def hits(self, text: str, *, unsure: bool) -> bool:
        """Whether the pattern matches text; `unsure` when it gave up (a deny pattern passes True,
        so a URL crafted to time it out is denied rather than let through)."""
        if self.timeouts >= MAX_TIMEOUTS:
            return unsure
        try:
            return self._compiled.search(text, timeout=MATCH_TIMEOUT) is not None
        except TimeoutError:
            self._gave_up(text)
            return unsure

    def finditer(self, text: str) -> Iterator["regex.Match"]:
        """The matches found within MATCH_TIMEOUT for the whole iteration; then it stops."""
        if self.timeouts >= MAX_TIMEOUTS:
            return
        try:
            yield from self._compiled.finditer(text, timeout=MATCH_TIMEOUT)
        except TimeoutError:
            self._gave_up(text)

    def _gave_up(self, text: str) -> None:
        self.timeouts += 1
        if self.timeouts < MAX_TIMEOUTS:
            log.warning(
                "regex %r gave up after %s s on %d characters: counted as no match",
                self.pattern,
                MATCH_TIMEOUT,
                len(text),
            )
            return
        log.error(
            "regex %r timed out %d times (%s s each): counted as no match and not run again by this process; "
            "it backtracks catastrophically, rewrite it",
            self.pattern,
            self.timeouts,
            MATCH_TIMEOUT,
        )


def pattern_problem(pattern: str) -> str | None:
    """Why a user's pattern is refused, or None: it is not a Python regular expression, or it nests
    repeats so that matching can take exponential time (the obvious cases only: the time limit of
    UserPattern is what bounds the others)."""
    if error := compile_error(pattern):
        return f"is not a regular expression: {error}"
    return NESTED_REPEATS if nests_repeats(pattern) else None


def compile_error(pattern: str) -> str | None:
    """Why the pattern does not compile, in the stdlib's words (users write Python regexes), or None."""
    try:
        re.compile(pattern)
        regex.compile(pattern)
    except (re.error, regex.error, RecursionError, OverflowError, ValueError) as exc:
        return str(exc)
    return None


def nests_repeats(pattern: str) -> bool:
    """Whether a pattern that compiles repeats a group that repeats: see _nests_repeats."""
    return _nests_repeats(_parser.parse(pattern))


def _nests_repeats(items) -> bool:
    """Whether an unbounded repeat holds a repeat of varying count and nothing that marks where one
    of its iterations ends: (a+)+, (x+x+)+, (\\w+\\s?)*, (a{1,5})+, but not (/[a-z]+)+ or (\\d{4}-?)+."""
    for op, av in items:
        if op in _REPEATS and av[1] == sre.MAXREPEAT and _repeats_variably(av[2]) and not _delimited(av[2]):
            return True
        if any(_nests_repeats(child) for child in _children(op, av)):
            return True
    return False


def _repeats_variably(items) -> bool:
    """Whether items hold a repeat whose count can vary (a+, a?, a{1,5}; not a{4})."""
    return any(
        (op in _REPEATS and av[0] != av[1]) or any(_repeats_variably(c) for c in _children(op, av)) for op, av in items
    )


def _delimited(items) -> bool:
    """Whether every match of items consumes a character outside its repeats of varying count."""
    for op, av in items:
        if op in _ONE_CHARACTER:
            return True
        if op is sre.SUBPATTERN and _delimited(av[-1]):
            return True
        if op is sre.BRANCH and all(_delimited(branch) for branch in av[1]):
            return True
        if op in _REPEATS and av[0] == av[1] >= 1 and _delimited(av[2]):
            return True
    return False


def _children(op, av) -> list:
    """The sub-patterns of one parsed item that can backtrack."""
    if op is sre.SUBPATTERN:
        return [av[-1]]
    if op is sre.BRANCH:
        return list(av[1])
    if op in (sre.ASSERT, sre.ASSERT_NOT):
        return [av[1]]
    if op is sre.GROUPREF_EXISTS:
        return [branch for branch in av[1:] if branch is not None]
    if op in _REPEATS:
        return [av[2]]
    return []
