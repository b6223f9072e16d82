"""Records from JSON APIs: fields picked by path, checked against a JSON Schema, and the next page's URL.
Pure: bytes in, an ApiResult out; no Django, no network (remote schema $refs are never fetched)."""

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from itertools import islice
from typing import Any
from urllib.parse import quote_plus, unquote_plus, urlsplit, urlunsplit

import jsonschema
import referencing
from jsonschema.validators import validator_for

from core.hrefs import absolute_http_url

MAX_RECORDS = 10_000
MAX_ERRORS_PER_RECORD = 20
MAX_ERROR_CHARS = 300
CONFIG_KEYS = ("records", "fields", "schema", "next")
LINK_KEYS = ("link",)
_PARAM_CHECKS = {  # type(...) is int: JSON's true is not a page number
    "param": (lambda value: isinstance(value, str) and value != "", "a query parameter name"),
    "start": (lambda value: type(value) is int, "an integer"),
    "stop_when_empty": (lambda value: type(value) is bool, "true or false"),
    "max_pages": (lambda value: type(value) is int and value > 0, "a positive integer"),
}
PARAM_KEYS = tuple(_PARAM_CHECKS)
_MISSING = object()  # a path that leads nowhere; JSON null is None
_CHARSET = re.compile(r"charset\s*=\s*[\"']?([\w.:-]+)", re.IGNORECASE)

Path = tuple[str, ...]


class ApiConfigError(ValueError):
    """A configuration that cannot be used; the message names the offending key, for the admin."""


@dataclass(frozen=True)
class LinkPagination:
    path: Path


@dataclass(frozen=True)
class ParamPagination:
    param: str
    start: int = 1
    stop_when_empty: bool = True
    max_pages: int = 1000


@dataclass
class ApiResult:
    records: list[dict] = field(default_factory=list)
    errors: list[list[str]] = field(default_factory=list)  # per record; [] when it is valid
    next_url: str | None = None
    error: str = ""  # "not_json: ..." or "bad_records_path: ..."; the page as a whole failed
    total: int = 0  # records in the document, before the cap

    @property
    def truncated(self) -> bool:
        return self.total > len(self.records)


@dataclass(frozen=True)
class ApiConfig:
    records_path: Path = ()
    fields: dict[str, Path] | None = None
    validator: Any = field(default=None, compare=False, repr=False)
    pagination: LinkPagination | ParamPagination | None = None
    max_records: int = MAX_RECORDS

    def extract(self, body: bytes, url: str, content_type: str = "") -> ApiResult:
        """The page's records, each with its schema errors (invalid ones are kept), and the next
        page's URL. Never raises: a page that fails as a whole says why in `error`."""
        try:
            doc = parse_json(body, content_type)
        except ValueError as exc:
            return ApiResult(error=f"not_json: {exc}", next_url=self._next_url(_MISSING, url, had_records=False))
        items, error = self._items(doc)
        outputs = [self._output(item) for item in items[: self.max_records]]
        return ApiResult(
            records=[record for record, _ in outputs],
            errors=[errors for _, errors in outputs],
            next_url=self._next_url(doc, url, had_records=bool(items)),
            error=error,
            total=len(items),
        )

    def _items(self, doc: Any) -> tuple[list, str]:
        found = lookup(doc, self.records_path)
        if isinstance(found, list):
            return found, ""
        if isinstance(found, dict):
            return [found], ""
        where = ".".join(self.records_path) or "the document"
        if found is _MISSING:
            return [], f"bad_records_path: {where!r} not found"
        return [], f"bad_records_path: {where} is {_json_type(found)}, not a list or an object"

    def _output(self, item: Any) -> tuple[dict, list[str]]:
        if self.fields is not None:
            picked = ((name, lookup(item, path)) for name, path in self.fields.items())
            record = {name: value for name, value in picked if value is not _MISSING}
        elif isinstance(item, dict):
            record = item
        else:  # kept, like every record, but output records are objects
            return {"value": item}, [f"record is {_json_type(item)}, not an object"]
        return record, self._validate(record)

    def _validate(self, record: dict) -> list[str]:
        if self.validator is None:
            return []
        try:
            return [_describe(e) for e in islice(self.validator.iter_errors(record), MAX_ERRORS_PER_RECORD)]
        except Exception as exc:  # an unresolvable $ref, a recursion limit...: one record's error, not the page's
            return [f"schema: cannot validate: {type(exc).__name__}: {str(exc)[:MAX_ERROR_CHARS]}"]

    def _next_url(self, doc: Any, url: str, *, had_records: bool) -> str | None:
        if isinstance(self.pagination, LinkPagination):
            return _link_url(lookup(doc, self.pagination.path), url)
        if isinstance(self.pagination, ParamPagination):
            return _param_url(self.pagination, url, had_records=had_records)
        return None


def compile_api_config(config: dict, *, max_records: int = MAX_RECORDS) -> ApiConfig:
    """Check a project's JSON API configuration up front and build its extractor.
    Raises ApiConfigError with a message fit to show when the user saves it."""
    if not isinstance(config, dict):
        raise ApiConfigError(f"config: must be a JSON object, not {_json_type(config)}")
    _reject_unknown(config, CONFIG_KEYS, "config")
    return ApiConfig(
        records_path=_path(config.get("records"), "records", allow_empty=True),
        fields=_fields(config.get("fields")),
        validator=_validator(config.get("schema")),
        pagination=_pagination(config.get("next")),
        max_records=max_records,
    )


def config_version(config: dict) -> str:
    """A short hash that changes exactly when the configuration does (key order aside)."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()[:12]


def lookup(value: Any, path: Path) -> Any:
    """What a dotted path leads to: object keys, and integer parts as list indexes; _MISSING if nothing."""
    for part in path:
        if isinstance(value, dict):
            value = value.get(part, _MISSING)
        elif isinstance(value, list) and part.isascii() and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return _MISSING
    return value


def parse_json(body: bytes, content_type: str = "") -> Any:
    """The JSON document in body; ValueError with a short reason when it is not one. NaN and
    Infinity are refused: records end up in PostgreSQL's jsonb, which has no such numbers."""
    text = _decode(body, content_type)
    if not text.strip():
        raise ValueError("empty body")
    try:
        return json.loads(text, parse_constant=_finite_float, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _decode(body: bytes, content_type: str) -> str:
    """UTF-8 (with or without a BOM) or UTF-16/32 sniffed as json.loads does; failing that, the
    charset declared in content_type; failing that, UTF-8 with replacement characters."""
    try:
        return body.decode(json.detect_encoding(body))
    except UnicodeDecodeError:
        pass
    declared = _CHARSET.search(content_type or "")
    for encoding in (declared and declared.group(1), "utf-8"):
        try:
            return body.decode(encoding, "replace")
        except (LookupError, TypeError, ValueError):  # none declared, unknown, bytes-to-bytes, strict-only codecs
            continue
    return ""


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text[:20]} is not a finite number")
    return number


def _link_url(href: Any, url: str) -> str | None:
    if not isinstance(href, str):
        return None
    next_url = absolute_http_url(url, href)
    return None if next_url == url.partition("#")[0] else next_url  # a self-link would loop


def _param_url(spec: ParamPagination, url: str, *, had_records: bool) -> str | None:
    if spec.stop_when_empty and not had_records:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    current = _query_int(parts.query, spec.param, default=spec.start)
    if current - spec.start + 1 >= spec.max_pages:
        return None
    query = _set_query(parts.query, spec.param, str(current + 1))
    return urlunsplit(parts._replace(query=query, fragment=""))


def _query_int(query: str, name: str, *, default: int) -> int:
    for segment in query.split("&"):
        key, _, value = segment.partition("=")
        if unquote_plus(key) == name:
            try:
                return int(unquote_plus(value))
            except ValueError:
                return default
    return default


def _set_query(query: str, name: str, value: str) -> str:
    """query with name=value in place of name's first occurrence (later ones dropped), or appended;
    other segments are kept byte for byte, in order, so their encoding does not change."""
    segments, placed = [], False
    for segment in query.split("&") if query else []:
        if unquote_plus(segment.partition("=")[0]) != name:
            segments.append(segment)
        elif not placed:
            segments.append(f"{quote_plus(name)}={value}")
            placed = True
    if not placed:
        segments.append(f"{quote_plus(name)}={value}")
    return "&".join(segments)


def _describe(error: jsonschema.ValidationError) -> str:
    """ "price: 'abc' is not of type 'number'": where in the record, then what is wrong."""
    message = error.message[:MAX_ERROR_CHARS]  # the message quotes the value, which can be huge
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {message}" if where else message


def _reject_unknown(spec: dict, allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(str(key) for key in spec if key not in allowed)
    if unknown:
        names = ", ".join(repr(key) for key in unknown)
        raise ApiConfigError(f"{where}: unknown key {names}; allowed: {', '.join(allowed)}")


def _path(value: Any, where: str, *, allow_empty: bool = False) -> Path:
    if allow_empty and value in (None, ""):
        return ()
    if not isinstance(value, str) or not value:
        raise ApiConfigError(f"{where}: a path must be a non-empty string like 'data.items.0', not {value!r}")
    parts = tuple(value.split("."))
    if not all(parts):
        raise ApiConfigError(f"{where}: {value!r} has an empty part; paths look like 'data.items.0'")
    return parts


def _fields(spec: Any) -> dict[str, Path] | None:
    if spec is None:
        return None
    if not isinstance(spec, dict) or not spec or not all(isinstance(name, str) and name for name in spec):
        raise ApiConfigError('fields: must map output names to paths, e.g. {"name": "attributes.name"}')
    return {name: _path(path, f"fields.{name}") for name, path in spec.items()}


def _validator(schema: Any) -> Any:
    if schema is None:
        return None
    if not isinstance(schema, dict | bool):
        raise ApiConfigError(f"schema: must be a JSON Schema (an object), not {_json_type(schema)}")
    cls = _schema_class(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = ".".join(str(part) for part in exc.absolute_path)
        raise ApiConfigError(f"schema: invalid JSON Schema{f' at {where}' if where else ''}: {exc.message}") from None
    # An empty registry, not jsonschema's default: that one downloads remote $refs.
    return cls(schema, registry=referencing.Registry(), format_checker=cls.FORMAT_CHECKER)


def _schema_class(schema: dict | bool) -> type:
    if not isinstance(schema, dict) or "$schema" not in schema:
        return jsonschema.Draft202012Validator
    declared = schema["$schema"]
    cls = validator_for(schema, default=None) if isinstance(declared, str) else None
    if cls is None:
        raise ApiConfigError(f"schema: unknown $schema {declared!r}; use draft 2020-12 or draft-07")
    return cls


def _pagination(spec: Any) -> LinkPagination | ParamPagination | None:
    if spec is None:
        return None
    if not isinstance(spec, dict) or ("link" in spec) == ("param" in spec):
        raise ApiConfigError("next: needs either 'link' (a path to the next page's URL) or 'param' (a query parameter)")
    if "link" in spec:
        _reject_unknown(spec, LINK_KEYS, "next")
        return LinkPagination(_path(spec["link"], "next.link"))
    _reject_unknown(spec, PARAM_KEYS, "next")
    for key, (is_valid, wanted) in _PARAM_CHECKS.items():
        if key in spec and not is_valid(spec[key]):
            raise ApiConfigError(f"next.{key}: must be {wanted}, not {spec[key]!r}")
    return ParamPagination(**spec)


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, int | float) else type(value).__name__)
