"""Python spiders for what declarative rules cannot express: routed handlers and a small registry.

Pure: a Response in, a SpiderResult out; no Django, no network. A spider is a subclass of Spider
whose methods are marked with @route(regex); see scrape/example_spiders.py.

    @register
    class ShopSpider(Spider):
        name = "shop"

        @route(r"/product/")
        def product(self, response):
            self.log.info("product %s", response.url)  # kept with the page (HandlerLog)
            yield {"title": response.xpath("string(//h1)")}
            yield Follow("/related")
            yield Request("/api/stock", method="POST", json={"id": 7}, route="stock", meta={"id": 7})

        def stock(self, response):
            yield {"id": response.meta["id"], "stock": response.json()["stock"]}
"""

import codecs
import contextlib
import contextvars
import functools
import importlib
import json
import logging
import re
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urljoin

import lxml.etree
import lxml.html

from core.hrefs import absolute_http_url

from .extractors import looks_like_html
from .handler_log import LogLine, handler_log_captured
from .render_plan import RenderSettingError, RoutePlan, checked_actions, render_mode
from .spider_request import Follow, Request, RequestError  # noqa: F401 - spiders import them from here

MAX_ERROR_CHARS = 2000
_CHARSET = re.compile(r"""charset\s*=\s*["']?([\w.:-]+)""", re.IGNORECASE)
_BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_ROUTES_ATTR = "_spider_routes"
_RENDER_ATTR = "_spider_render"


class SpiderError(Exception):
    """A spider cannot be registered, found or loaded, or a Response helper cannot work."""


@dataclass
class Response:
    url: str
    status: int
    headers: dict
    body: bytes
    request: Request | None = None  # what was sent (method, headers, meta...); a plain GET of url if not given

    def __post_init__(self) -> None:
        if self.request is None:
            self.request = Request(self.url)

    @property
    def meta(self) -> dict:
        """The meta of the Request that fetched this page ({} for a link found by URL)."""
        return self.request.meta

    @property
    def content_type(self) -> str:
        """The header's media type, lower case, without parameters ("text/html")."""
        return self._header("content-type").split(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        """The content-type charset if Python knows it, else None."""
        match = _CHARSET.search(self._header("content-type"))
        if not match:
            return None
        try:
            return codecs.lookup(match.group(1)).name
        except LookupError:
            return None

    @functools.cached_property
    def text(self) -> str:
        """The body decoded with the content-type charset, else UTF-8; bad bytes become U+FFFD."""
        try:
            return self.body.decode(self.charset or "utf-8", "replace")
        except (UnicodeError, ValueError):  # codecs that allow only strict errors ("idna")
            return self.body.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.text)

    @functools.cached_property
    def doc(self) -> lxml.html.HtmlElement | None:
        """The lxml.html document, parsed on first use; None unless the body is HTML."""
        if not self.body.strip() or not looks_like_html(self.content_type, self.body):
            return None
        # Decoded by Python when the header names a charset (libxml2 knows fewer names); otherwise,
        # or when a byte order mark says otherwise, libxml2 sniffs <meta charset> itself.
        if self.charset and not self.body.startswith(_BOMS):
            body, parser = self.text.encode("utf-8"), lxml.html.HTMLParser(encoding="utf-8")
        else:
            body, parser = self.body, lxml.html.HTMLParser()
        try:
            return lxml.html.document_fromstring(body, parser=parser)
        except (lxml.etree.ParserError, ValueError):
            return None

    def xpath(self, expr: str, **variables) -> list:
        """Elements, strings or a number, as lxml returns them; [] when the body is not HTML."""
        return [] if self.doc is None else self.doc.xpath(expr, **variables)

    def css(self, selector: str) -> list:
        """Elements matching a CSS selector (lxml.cssselect); [] when the body is not HTML."""
        matcher = _css_selector(selector)
        return [] if self.doc is None else matcher(self.doc)

    @functools.cached_property
    def soup(self) -> Any:
        """The body as BeautifulSoup (lxml's parser), built on first use; the header's charset, else
        what the document declares."""
        try:
            from bs4 import BeautifulSoup
        except ImportError as exc:
            raise SpiderError("Response.soup needs beautifulsoup4, which is not installed; use .xpath") from exc
        return BeautifulSoup(self.body, "lxml", from_encoding=self.charset)

    def urljoin(self, href: str) -> str:
        return urljoin(self.url, href)

    def _header(self, name: str) -> str:
        for key, value in self.headers.items():
            if key.lower() == name:
                return str(value)
        return ""


@functools.lru_cache(maxsize=256)
def _css_selector(selector: str) -> Callable:
    """A compiled selector, cached: translating CSS to XPath costs more than matching."""
    try:
        from lxml.cssselect import CSSSelector
    except ImportError as exc:  # lxml imports cssselect, a separate package, on demand
        raise SpiderError("Response.css needs the cssselect package, which is not installed; use .xpath") from exc
    return CSSSelector(selector)


@dataclass
class Media:
    url: str
    kind: str = "file"


@dataclass
class SpiderResult:
    items: list[dict] = field(default_factory=list)
    follow: list[str] = field(default_factory=list)
    media: list[tuple[str, str]] = field(default_factory=list)  # (url, kind)
    error: str = ""
    priorities: dict[str, int] = field(default_factory=dict)  # follow URL -> its priority, when not 0
    # Each request once (URL, method, body), its URL absolute; several may share a URL (POST bodies).
    requests: list[Request] = field(default_factory=list, compare=False)
    log: list[LogLine] = field(default_factory=list, compare=False)  # what the handler logged, its traceback


Handler = Callable[[Response], Any]


def route(
    pattern: str, *, render: bool | str | None = None, actions: list | None = None
) -> Callable[[Callable], Callable]:
    """Mark a Spider method as the handler of URLs that re.search(pattern) finds. Stackable.
    `render` (never, always, auto) and `actions` say how its pages are fetched (scrape/render_plan.py);
    they belong to the handler, whichever of its patterns matched."""
    regex = re.compile(pattern)
    try:
        mode, checked = render_mode(render), checked_actions(actions)
    except RenderSettingError as exc:
        raise SpiderError(f"@route({pattern!r}): {exc}") from None

    def mark(method: Callable) -> Callable:
        setattr(method, _ROUTES_ATTR, (*getattr(method, _ROUTES_ATTR, ()), regex))
        if mode is not None or checked:
            setattr(method, _RENDER_ATTR, RoutePlan(mode, f"spider:{method.__name__}", checked))
        return method

    return mark


class Spider:
    """Base class: set `name`, mark handlers with @route; an optional `default` handles the rest.

    Routes are tried in definition order, a subclass's own before those it inherits; the first
    whose regex searches the URL wins. A method overridden without @route loses its routes.
    """

    name: str = ""
    _routes: tuple[tuple[re.Pattern, str], ...] = ()
    sets_render = False  # whether a @route of it says how its pages are fetched (render=, actions=)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        routes, seen = [], set()
        for klass in cls.__mro__:
            for attr, value in vars(klass).items():
                if attr not in seen:
                    seen.add(attr)
                    routes.extend((regex, attr) for regex in getattr(value, _ROUTES_ATTR, ()))
        cls._routes = tuple(routes)
        cls.sets_render = any(getattr(getattr(cls, attr), _RENDER_ATTR, None) for _, attr in routes)

    @property
    def log(self) -> logging.Logger:
        """The spider's module logger: what a handler logs here (or with logging.getLogger(__name__))
        is kept with its page."""
        return logging.getLogger(type(self).__module__)

    def handler_for(self, url: str) -> Handler | None:
        for regex, attr in self._routes:
            if regex.search(url):
                return getattr(self, attr)
        return getattr(self, "default", None)

    def routes(self, url: str) -> bool:
        """Whether one of the spider's @route patterns matches `url` (its `default` aside)."""
        return any(regex.search(url) for regex, _ in self._routes)

    def render_plan(self, url: str, route_name: str | None = None) -> RoutePlan | None:
        """The render setting of the handler that parses `url` (the request's `route`, else the
        URL's @route), or None when its @route sets none."""
        handler = getattr(self, route_name, None) if route_name else self.handler_for(url)
        plan = getattr(handler, _RENDER_ATTR, None)
        return plan if plan is not None and plan.mode is not None else None

    def handler_named(self, name: str) -> Handler:
        """The handler a Request's `route` names: a public method of this spider."""
        handler = getattr(self, name, None)
        if name.startswith("_") or not callable(handler) or name in vars(Spider):
            raise SpiderError(f"route {name!r} is not a handler method of {type(self).__qualname__}")
        return handler


_REGISTRY: dict[str, type[Spider]] = {}
# Spider code compiled from a stored version registers into its own dict, never the global one.
_LOCAL_REGISTRY: contextvars.ContextVar[dict | None] = contextvars.ContextVar("spider_registry", default=None)


@contextlib.contextmanager
def registry_scope() -> Iterator[dict[str, type[Spider]]]:
    """Within it, @register records spiders in the dict it yields instead of the global registry."""
    local: dict[str, type[Spider]] = {}
    token = _LOCAL_REGISTRY.set(local)
    try:
        yield local
    finally:
        _LOCAL_REGISTRY.reset(token)


def register(spider_cls: type[Spider]) -> type[Spider]:
    """Register a Spider subclass under its name; usable as a class decorator.

    Registering a class of the same module and name again (a reloaded module) replaces it;
    a different class under a taken name is an error.
    """
    if not (isinstance(spider_cls, type) and issubclass(spider_cls, Spider)):
        raise SpiderError(f"{spider_cls!r} is not a Spider subclass")
    name = spider_cls.name
    if not name or not isinstance(name, str):
        raise SpiderError(f"{spider_cls.__qualname__} has no name")
    registry = _LOCAL_REGISTRY.get()
    registry = _REGISTRY if registry is None else registry
    taken = registry.get(name)
    if taken is not None and _qualified(taken) != _qualified(spider_cls):
        raise SpiderError(f"spider name {name!r} is taken by {_qualified(taken)}")
    registry[name] = spider_cls
    return spider_cls


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def get_spider(name: str) -> Spider:
    try:
        return _REGISTRY[name]()
    except KeyError:
        known = ", ".join(spider_names()) or "none"
        raise SpiderError(f"unknown spider {name!r} (registered: {known})") from None


def spider_names() -> list[str]:
    return sorted(_REGISTRY)


def load_spider_modules(module_paths: list[str]) -> None:
    """Import each dotted module path so that its @register decorators run."""
    for path in module_paths:
        try:
            importlib.import_module(path)
        except Exception as exc:  # a module may raise anything while it is imported
            raise SpiderError(f"cannot import spider module {path!r}: {type(exc).__name__}: {exc}") from exc


def run_spider(spider: Spider, response: Response) -> SpiderResult:
    """Run the handler for the response (its request's `route`, else the URL's @route) and collect
    what it yields, and what it logs. Never raises on handler errors.

    Request and Media URLs are resolved against response.url, stripped of fragments, deduplicated
    and kept only when http(s). If the handler raises (also midway through a generator), the
    result has no items, follows or media, `error` is "spider_error: <Type>: <message>" and the
    traceback ends its log.
    """
    modules = {klass.__module__ for klass in type(spider).__mro__ if issubclass(klass, Spider) and klass is not Spider}
    with handler_log_captured(sorted(modules)) as capture:
        try:
            handler = _handler(spider, response)
            result = SpiderResult() if handler is None else _collect(handler(response), response.url, spider)
        except Exception as exc:
            capture.add_traceback(traceback.format_exc())
            result = SpiderResult(error=f"spider_error: {type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS])
    result.log = list(capture.lines)
    return result


def run_start(spider: Spider) -> SpiderResult:
    """The requests the spider's start() hook yields (absolute http(s) URLs; none without a hook),
    and what it logs. Never raises: an error is kept as run_spider keeps a handler's."""
    modules = {klass.__module__ for klass in type(spider).__mro__ if issubclass(klass, Spider) and klass is not Spider}
    with handler_log_captured(sorted(modules)) as capture:
        try:
            start = getattr(spider, "start", None)
            result = _collect(start(), "", spider) if callable(start) else SpiderResult()
        except Exception as exc:
            capture.add_traceback(traceback.format_exc())
            result = SpiderResult(error=f"spider_error: {type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS])
    result.log = list(capture.lines)
    return result


def _handler(spider: Spider, response: Response) -> Handler | None:
    route = response.request.route
    return spider.handler_named(route) if route else spider.handler_for(response.url)


def _collect(output: Any, base_url: str, spider: Spider) -> SpiderResult:
    if isinstance(output, SpiderResult):
        outputs = [*output.items, *map(Request, output.follow), *(Media(u, k) for u, k in output.media)]
    elif output is None:
        outputs = []
    elif isinstance(output, dict | Request | Media):
        outputs = [output]
    else:
        outputs = output
    result, requests, media = SpiderResult(), {}, {}
    for value in _iterate(outputs):
        if isinstance(value, dict):
            result.items.append(value)
        elif isinstance(value, Request):
            _add_request(requests, base_url, value, spider)
        elif isinstance(value, Media):
            _add_url(media, base_url, value.url, value.kind)
        else:
            raise TypeError(f"a handler may yield dict, Follow or Media, not {type(value).__name__}")
    result.requests, result.media = list(requests.values()), list(media.items())
    result.follow = list(dict.fromkeys(r.url for r in result.requests))
    for request in result.requests:
        if request.priority:
            result.priorities.setdefault(request.url, request.priority)
    return result


def _iterate(outputs: Any) -> Iterable:
    if isinstance(outputs, str | bytes) or not isinstance(outputs, Iterable):
        raise TypeError(f"a handler must return an iterable or a SpiderResult, not {type(outputs).__name__}")
    return outputs


def _add_request(found: dict, base_url: str, request: Request, spider: Spider) -> None:
    """The first request for each (URL, method, body), its URL made absolute; a route must name a handler."""
    url = absolute_http_url(base_url, request.url if isinstance(request.url, str) else "")
    if request.route:
        spider.handler_named(request.route)
    if url is not None and (url, request.method, request.body) not in found:
        found[url, request.method, request.body] = request if request.url == url else replace(request, url=url)


def _add_url(found: dict, base_url: str, href: str, kind: str | None) -> None:
    url = absolute_http_url(base_url, href if isinstance(href, str) else "")
    if url is not None:
        found.setdefault(url, kind)
