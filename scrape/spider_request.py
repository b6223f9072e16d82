"""What a spider asks the crawl to fetch next (pyspider's `self.crawl`): URL, method, headers,
cookies, body, priority, age, itag, the handler that parses the answer and a little JSON for it, and
how to fetch it: proxy, render, timeout, retries and a not-before time.

Pure: no Django, no network. A Request is checked when it is made, so a bad one fails the page
whose handler made it (with the reason), never the batch. It travels through the frontier as the
page row's `request` JSON (`page_request()`, `from_page_request()`).
"""

import json
import re
from collections.abc import Callable
from dataclasses import KW_ONLY, InitVar, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from core.net.egress import upstream_of

from .render_plan import AUTO_KEY, MODES, RenderSettingError, checked_actions, render_mode

METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
MAX_META_BYTES = 4096  # meta is copied onto every row the request makes
MAX_BODY_BYTES = 65_536
MAX_ITAG_CHARS = 64
PRIORITIES = range(-32768, 32768)  # Page.priority is a smallint
MAX_TIMEOUT_SECONDS = 300.0
MAX_RETRIES = 20
# What page_request() keeps as it is (the others are written out by hand).
_STORED = ("headers", "cookies", "route", "meta", "itag", "proxy", "actions")
_OPTIONAL = ("age", "timeout", "retries")  # kept when not None
_NO_JSON = object()
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP header name
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # what no header value may carry (tab may)
_HANDLER = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class RequestError(ValueError):
    """A Request a spider made cannot be sent or stored as it is: the message says why."""


@dataclass
class Request:
    """One request to make. `body` is bytes, str, or made from `data=` (form-encoded) or `json=`;
    it must be UTF-8 text (the row stores it as JSON). `route` (a method name, or the bound method)
    parses the answer instead of the URL's @route; `meta` reaches it as `response.meta`.

    How it is fetched, overriding the project: `proxy` (an http:// proxy URL), `render` (True: in
    headless Chromium, False: a plain fetch), `timeout` (seconds for the whole answer), `retries`
    (tries after a transient failure before the page fails) and `not_before` (a datetime, or a
    delay in seconds: the page is not fetched before then). `render` is the setting rule sets and
    spider routes have too: "never" (False), "always" (True) or "auto" (plainly, until its route is
    found to need a browser: scrape/render_plan.py); `actions` run in the browser once the page has
    loaded (core/net/page_actions.py)."""

    url: str
    priority: int = 0  # higher is fetched sooner
    _: KW_ONLY
    method: str = "GET"
    headers: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)
    body: bytes | str | None = None
    data: InitVar[dict | None] = None  # form fields, sent as an x-www-form-urlencoded body
    json: InitVar[Any] = _NO_JSON  # any JSON value, sent as an application/json body
    age: int | None = None  # seconds: a known page fetched more recently is not fetched again for it
    itag: str = ""  # a marker: a known page stored with another itag is fetched again
    route: str | Callable | None = None
    meta: dict = field(default_factory=dict)
    proxy: str = ""
    render: bool | str | None = None
    actions: list[dict] = field(default_factory=list)
    timeout: float | None = None
    retries: int | None = None
    not_before: datetime | float | None = None

    def __post_init__(self, data: dict | None, json: Any) -> None:
        self.method = _method(self.method)
        self.headers, self.cookies = _strings("headers", self.headers), _strings("cookies", self.cookies)
        self.body = _body(self, data, json)
        self.priority = _priority(self.priority)
        self.age, self.itag = _age(self.age), _itag(self.itag)
        self.route, self.meta = _route(self.route), _meta(self.meta)
        self.proxy, self.render = _proxy(self.proxy), _render(self.render)
        self.actions = _actions(self.actions)
        self.timeout, self.retries = _timeout(self.timeout), _retries(self.retries)
        self.not_before = _not_before(self.not_before)

    def page_request(self) -> dict:
        """This request as its frontier row keeps it (Page.request): what differs from a plain GET."""
        stored = {"method": self.method} if self.method != "GET" else {}
        stored |= {"body": self.body.decode()} if self.body is not None else {}
        stored |= {name: value for name in _STORED if (value := getattr(self, name))}
        stored |= {name: value for name in _OPTIONAL if (value := getattr(self, name)) is not None}
        stored |= _stored_render(self.render)
        return stored | ({"not_before": self.not_before.isoformat()} if self.not_before else {})

    @classmethod
    def from_page_request(cls, url: str, stored: dict, priority: int = 0) -> "Request":
        """The request a row was fetched with (its `request` JSON: a seed's or a spider's)."""
        names = ("method", *_STORED, *_OPTIONAL)
        fields = {n: stored[n] for n in names if n in stored}
        if "render" in stored or AUTO_KEY in stored:
            fields["render"] = "auto" if AUTO_KEY in stored else stored["render"]
        if "not_before" in stored:
            fields["not_before"] = datetime.fromisoformat(stored["not_before"])
        return cls(url, priority, body=stored.get("body") or None, **fields)


Follow = Request  # the first name of it, still the usual one for a plain link


def _method(method: Any) -> str:
    name = method.upper() if isinstance(method, str) else method
    if name not in METHODS:
        raise RequestError(f"unknown method {method!r} (one of {', '.join(sorted(METHODS))})")
    return name


def _strings(what: str, values: Any) -> dict[str, str]:
    """Headers and cookies: str names to str values, none that could split a header."""
    if not isinstance(values, dict):
        raise RequestError(f"{what} must be a dict of str to str, not {type(values).__name__}")
    for name, value in values.items():
        if not (isinstance(name, str) and isinstance(value, str)):
            raise RequestError(f"{what} must map str to str: {name!r}: {value!r}")
        if not _TOKEN.match(name) or _CONTROL.search(value) or (what == "cookies" and ";" in value):
            raise RequestError(f"{what[:-1]} {name!r} has characters a request cannot carry")
    return dict(values)


def _body(request: Request, data: dict | None, payload: Any) -> bytes | None:
    given = [g for g, v in (("body", request.body), ("data", data), ("json", payload)) if v not in (None, _NO_JSON)]
    if len(given) > 1:
        raise RequestError(f"give one of body, data and json, not {' and '.join(given)}")
    if data is not None:
        body = urlencode(data, doseq=True).encode()
        request.headers.setdefault(_header_name(request, "Content-Type"), "application/x-www-form-urlencoded")
    elif payload is not _NO_JSON:
        body = _json_bytes("json", payload)
        request.headers.setdefault(_header_name(request, "Content-Type"), "application/json")
    else:
        body = request.body.encode() if isinstance(request.body, str) else request.body
    if body is None or body == b"":
        return None
    return _checked_body(request.method, body)


def _checked_body(method: str, body: Any) -> bytes:
    if not isinstance(body, bytes | bytearray):
        raise RequestError(f"body must be bytes or str, not {type(body).__name__}")
    if method in ("GET", "HEAD"):
        raise RequestError(f"a {method} request has no body: use POST, or put the fields in the URL")
    if len(body) > MAX_BODY_BYTES:
        raise RequestError(f"body of {len(body)} bytes is over {MAX_BODY_BYTES}")
    try:
        text = bytes(body).decode()
    except UnicodeDecodeError:
        raise RequestError("body must be UTF-8 text (the frontier stores it as JSON)") from None
    if "\x00" in text:
        raise RequestError("body must not contain NUL characters")
    return bytes(body)


def _header_name(request: Request, name: str) -> str:
    """The header's name as the spider spelled it, if given in another case."""
    return next((k for k in request.headers if k.lower() == name.lower()), name)


def _priority(priority: Any) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int) or priority not in PRIORITIES:
        raise RequestError(
            f"priority must be an int from {PRIORITIES.start} to {PRIORITIES.stop - 1}, not {priority!r}"
        )
    return priority


def _age(age: Any) -> int | None:
    if age is not None and (isinstance(age, bool) or not isinstance(age, int) or age < 0):
        raise RequestError(f"age must be a number of seconds (an int, 0 or more), not {age!r}")
    return age


def _itag(itag: Any) -> str:
    itag = str(itag) if isinstance(itag, int) and not isinstance(itag, bool) else itag
    if not isinstance(itag, str) or len(itag) > MAX_ITAG_CHARS:
        raise RequestError(f"itag must be a str of at most {MAX_ITAG_CHARS} characters, not {itag!r}")
    return itag


def _route(route: Any) -> str | None:
    name = getattr(route, "__name__", route) if callable(route) else route
    if name is not None and not (isinstance(name, str) and _HANDLER.match(name)):
        raise RequestError(f"route must name a handler method of the spider, not {route!r}")
    return name or None


def _proxy(proxy: Any) -> str:
    """An http:// proxy URL, checked as a project's proxy is (credentials in it are kept)."""
    if proxy in ("", None):
        return ""
    if not isinstance(proxy, str):
        raise RequestError(f"proxy must be an http:// URL, not {type(proxy).__name__}")
    try:
        upstream_of(proxy)
    except ValueError as exc:
        raise RequestError(str(exc).replace("a project proxy", "proxy")) from None
    return proxy.strip()


def _render(render: Any) -> bool | str | None:
    if render is not None and not isinstance(render, bool) and render not in MODES:
        raise RequestError(
            f"render must be True, False, one of {', '.join(MODES)}, or None (its route's or project's), not {render!r}"
        )
    return render


def _stored_render(render: bool | str | None) -> dict:
    """The row's columns for it: `render` true or false; auto is fetched plainly first, its route
    (`render_auto`) named when the link is planned (scrape/render_plan.py)."""
    mode = render_mode(render)
    if mode is None:
        return {}
    return {"render": False, AUTO_KEY: ""} if mode == "auto" else {"render": mode == "always"}


def _actions(actions: Any) -> list[dict]:
    try:
        return list(checked_actions(actions))
    except RenderSettingError as exc:
        raise RequestError(str(exc)) from None


def _timeout(timeout: Any) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT_SECONDS:
        raise RequestError(f"timeout must be seconds, more than 0 and at most {MAX_TIMEOUT_SECONDS:g}, not {timeout!r}")
    return float(timeout)


def _retries(retries: Any) -> int | None:
    if retries is not None and (
        isinstance(retries, bool) or not isinstance(retries, int) or retries not in range(MAX_RETRIES + 1)
    ):
        raise RequestError(f"retries must be an int from 0 to {MAX_RETRIES}, not {retries!r}")
    return retries


def _not_before(when: Any) -> datetime | None:
    """An aware datetime (a naive one is UTC); a number of seconds is that long from now."""
    if when is None:
        return None
    if isinstance(when, datetime):
        return when if when.tzinfo else when.replace(tzinfo=UTC)
    if isinstance(when, bool) or not isinstance(when, int | float) or not 0 <= when < 10 * 365 * 86400:
        raise RequestError(f"not_before must be a datetime or a delay in seconds (0 or more), not {when!r}")
    return datetime.now(UTC) + timedelta(seconds=when)


def _meta(meta: Any) -> dict:
    if not isinstance(meta, dict):
        raise RequestError(f"meta must be a dict, not {type(meta).__name__}")
    encoded = _json_bytes("meta", meta)
    if len(encoded) > MAX_META_BYTES:
        raise RequestError(f"meta is {len(encoded)} bytes as JSON, over {MAX_META_BYTES}")
    return meta


def _json_bytes(what: str, value: Any) -> bytes:
    """JSON that PostgreSQL's jsonb takes too: no NaN, no NUL character, no lone surrogate."""
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        raise RequestError(f"{what} must be JSON-serialisable: {exc}") from None
    if _has_nul(value):
        raise RequestError(f"{what} must not contain NUL characters")
    return encoded


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    return isinstance(value, list | tuple) and any(map(_has_nul, value))
