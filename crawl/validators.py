"""Validators shared by every way in (admin forms, the API, commands that full_clean): each refused
line of a list field is named by its number and its text."""

import re
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

from core.blocks import rules_problems
from core.patterns import pattern_problem
from crawl.session_rules import selector_xpath, statuses_of

MEDIA_KINDS = ("image", "video", "audio", "file")
_EXTENSION = re.compile(r"\.?[A-Za-z0-9][A-Za-z0-9_+-]*(\.[A-Za-z0-9][A-Za-z0-9_+-]*)*")
_MIME_TOKEN = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*"
_MIME_TYPE = re.compile(rf"{_MIME_TOKEN}/(\*|{_MIME_TOKEN})")
_HOST = re.compile(r"[^\s,/]+")
_MAX_JSON_DEPTH = 20


def _numbered_lines(value: str) -> list[tuple[int, str]]:
    """(line number, stripped line) of each non-blank line, numbered as the text's own lines."""
    return [(n, line.strip()) for n, line in enumerate((value or "").split("\n"), start=1) if line.strip()]


def _each_line(value: str, problem: Callable[[str], str | None]) -> None:
    errors = [f"line {n}: {line[:100]!r} {why}" for n, line in _numbered_lines(value) if (why := problem(line))]
    if errors:
        raise ValidationError(errors)


def regex_lines(value: str) -> None:
    """Every non-blank line is a Python regular expression (commas belong to the pattern) that cannot
    obviously backtrack catastrophically (core/patterns.py)."""
    _each_line(value, pattern_problem)


def block_rule_list(value) -> None:
    """A project's own block rules (core/blocks.py): a list of rules, each with known conditions."""
    if problems := rules_problems(value):
        raise ValidationError(problems)


def extension_lines(value: str) -> None:
    """Every non-blank line is one file extension, like .jpg or tar.gz."""
    _each_line(value, lambda line: None if _EXTENSION.fullmatch(line) else "is not a file extension (one per line)")


def mime_type_lines(value: str) -> None:
    """Every non-blank line is one MIME type, like image/png or video/*."""
    _each_line(value, lambda line: None if _MIME_TYPE.fullmatch(line) else "is not a MIME type (one per line)")


def host_lines(value: str) -> None:
    """Every non-blank line is one host name: a comma or a space means two hosts on one line."""
    _each_line(value, lambda line: None if _HOST.fullmatch(line) else "is not one host name (one per line)")


_KIND = "(" + "|".join(MEDIA_KINDS) + ")"
media_kinds = RegexValidator(
    rf"^\s*({_KIND}\s*)?(,\s*({_KIND}\s*)?)*$",  # unambiguous: no backtracking blow-up
    message=f"Comma-separated media kinds, from: {', '.join(MEDIA_KINDS)}.",
    flags=re.IGNORECASE,
)


def _has_bad_chars(text: str) -> bool:
    """NUL is refused by PostgreSQL text and jsonb; lone surrogates cannot be encoded as UTF-8."""
    return "\x00" in text or any("\ud800" <= ch <= "\udfff" for ch in text)


def json_problem(value: Any, depth: int = 0) -> str | None:
    """Why a decoded JSON value cannot be stored in jsonb, or None."""
    if depth > _MAX_JSON_DEPTH:
        return f"nested deeper than {_MAX_JSON_DEPTH} levels"
    if isinstance(value, str):
        return "strings may not contain NUL or unpaired surrogate characters" if _has_bad_chars(value) else None
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        items = value
    else:
        return None
    return next((p for item in items if (p := json_problem(item, depth + 1))), None)


# Browsers' limits (RFC 6265 section 6.1 asks a browser to keep at least 4096 bytes a cookie and 50
# cookies a domain): the session jar (fetch/cookies.py) and a project's own cookies keep to them.
MAX_COOKIE_BYTES = 4096  # name and value, in UTF-8
MAX_COOKIES_PER_DOMAIN = 50


def cookie_map(value: Any) -> None:
    """A project's own cookies: at most MAX_COOKIES_PER_DOMAIN, each at most MAX_COOKIE_BYTES."""
    if not isinstance(value, dict):
        return  # the field's own checks say what is wrong
    if len(value) > MAX_COOKIES_PER_DOMAIN:
        raise ValidationError(f"at most {MAX_COOKIES_PER_DOMAIN} cookies (a browser keeps no more for a site)")
    big = next(
        (name for name, v in value.items() if len(f"{name}{v}".encode(errors="replace")) > MAX_COOKIE_BYTES), None
    )
    if big is not None:
        raise ValidationError(f"the cookie {str(big)[:100]!r} is over {MAX_COOKIE_BYTES} bytes (name and value)")


def crontab_fields(expression: str) -> dict:
    """ "m h dom mon dow" (UTC) as CrontabSchedule fields; a clear error otherwise."""
    parts = expression.split()
    if len(parts) != 5:
        raise ValidationError(f"a crontab has 5 fields (minute hour day-of-month month day-of-week), not {len(parts)}")
    names = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
    return dict(zip(names, parts, strict=True))


def status_list(value: str) -> None:
    """HTTP statuses separated by spaces or commas, like "403 429"."""
    try:
        statuses_of(value)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


def css_selector(value: str) -> None:
    """One CSS selector, like form#login."""
    try:
        selector_xpath(value)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


def proxy_url(value: str) -> None:
    """An http:// proxy URL with a host (credentials in it are kept, and never quoted back)."""
    from core.net.egress import upstream_of  # the gate's own reading of it

    try:
        upstream_of(value)
    except ValueError:
        raise ValidationError(
            "a proxy must be an http:// URL with a host, e.g. http://user:password@proxy:3128"
        ) from None
