"""core.patterns: users' regular expressions (a project's scope and media patterns, a rule set's
regexes) are refused when they nest repeats, and give up in bounded time when they backtrack
catastrophically anyway (ReDoS). Pure: no database, no network."""

import logging
import time

import pytest
from django.core.exceptions import ValidationError

from core import patterns
from core.canonical import Scope
from crawl.validators import regex_lines
from scrape.rules import RuleError, compile_rules

SLOW = "(a|aa)+$"  # passes validation (no nested repeat), yet backtracks exponentially on "aaa...!"
HOSTILE = "a" * 1900 + "!"
# Each search may take MATCH_TIMEOUT, and a pattern runs MAX_TIMEOUTS times at most: then slack.
# Unbounded backtracking on HOSTILE would run for hours: a few give-ups plus a busy machine's slack stay far below.
BOUND = patterns.MAX_TIMEOUTS * 0.2 + 10.0


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(x+x+)+y", r"(\w+\s?)*$", r"(?:\d*)*", r"([a-z]{1,9})+"])
def test_it_refuses_nested_repeats_in_a_projects_patterns_and_rule_sets(pattern):
    with pytest.raises(ValidationError, match="catastrophic backtracking"):
        regex_lines(f"/ok/\n{pattern}")
    with pytest.raises(RuleError, match=r"fields\.p\.regex: .*catastrophic backtracking"):
        compile_rules({"fields": {"p": {"css": "p", "regex": pattern}}})
    with pytest.raises(RuleError, match=r"follow\[0\]: .*catastrophic backtracking"):
        compile_rules({"follow": [pattern]})


@pytest.mark.parametrize(
    "pattern", [r"/p\d{1,3}\.html", r"(/[a-z]+)+/$", r"(?:[^/]+/)*index\.html", r"(\d{4}-?)+", r"(?i)/LOGIN", SLOW]
)
def test_it_accepts_patterns_whose_repeats_are_delimited(pattern):
    assert patterns.pattern_problem(pattern) is None
    regex_lines(f"/ok/\n{pattern}")  # a project's pattern list: raises ValidationError on a refused line
    rules = compile_rules({"follow": [pattern], "fields": {"p": {"css": "p", "regex": pattern}}})
    assert [p.pattern for p in rules.follow_patterns] == [pattern]
    assert [(f.name, f.regex.pattern) for f in rules.fields] == [("p", pattern)]


def test_a_catastrophic_scope_pattern_gives_up_in_bounded_time_and_then_is_not_run(caplog):
    scope = Scope.build(domains=["a.test"], deny=[SLOW])
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="crawlhub.patterns"):
        verdicts = [scope.rejects(f"http://a.test/{HOSTILE}", 1) for _ in range(20)]
    assert time.monotonic() - started < BOUND
    assert verdicts == ["denied"] * 20, "a deny pattern that gives up denies (fails closed)"
    assert scope.deny[0].given_up
    assert "not run again" in caplog.text and SLOW in caplog.text
    started = time.monotonic()
    assert scope.rejects("http://a.test/aa", 1) == "denied"  # given up: no longer run, still closed
    assert time.monotonic() - started < 0.05


def test_an_allow_pattern_that_gives_up_does_not_let_the_url_in():
    scope = Scope.build(domains=["a.test"], allow=[SLOW])
    assert scope.rejects(f"http://a.test/{HOSTILE}", 1) == "not_allowed"
