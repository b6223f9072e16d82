"""What a spider asks the crawl to fetch next (pyspider's `self.crawl`): URL, method, headers,
cookies, body, priority, age, itag, the handler that parses the answer and a little JSON for it.

Pure: no Django, no network. A Request is checked when it is made, so a bad one fails the page
whose handler made it (with the reason), never the batch. It travels through the frontier as the
page row's `request` JSON (`page_request()`, `from_page_request()`).
"""

import json
import re
from collections.abc import Callable
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any
from urllib.parse import urlencode

METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
MAX_META_BYTES = 4096  # meta is copied onto every row the request makes
MAX_BODY_BYTES = 65_536
MAX_ITAG_CHARS = 64
PRIORITIES = range(-32768, 32768)  # Page.priority is a smallint
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
    parses the answer instead of the URL's @route; `meta` reaches it as `response.meta`."""

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

    def __post_init__(self, data: dict | None, json: Any) -> None:
        self.method = _method(self.method)
        self.headers, self.cookies = _strings("headers", self.headers), _strings("cookies", self.cookies)
        self.body = _body(self, data, json)
        self.priority = _priority(self.priority)
        self.age, self.itag = _age(self.age), _itag(self.itag)
        self.route, self.meta = _route(self.route), _meta(self.meta)

    def page_request(self) -> dict:
        """This request as its frontier row keeps it (Page.request): what differs from a plain GET."""
        stored = {"method": self.method} if self.method != "GET" else {}
        stored |= {"body": self.body.decode()} if self.body is not None else {}
        stored |= {
            name: value for name in ("headers", "cookies", "route", "meta", "itag") if (value := getattr(self, name))
        }
        return stored | ({"age": self.age} if self.age is not None else {})

    @classmethod
    def from_page_request(cls, url: str, stored: dict, priority: int = 0) -> "Request":
        """The request a row was fetched with (its `request` JSON: a seed's or a spider's)."""
        names = ("method", "headers", "cookies", "age", "itag", "route", "meta")
        return cls(url, priority, body=stored.get("body") or None, **{n: stored[n] for n in names if n in stored})


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
