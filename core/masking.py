"""The one masking rule: what people may not read back is shown as the mask, on every surface (the
API, the admin, exports, Try a URL, alerts, sinks' errors, logs and commands). Secrets are header and
cookie values, request bodies, the cookies a site sets (Set-Cookie), the credentials in a URL
(user:password@), and the path and query of a webhook URL (where Slack, Discord and Teams keep
theirs). Pure functions: the API and the admin show `masked_*` and pass what comes back through
`unmasked_*`, so a form or a PUT that returns the mask keeps the stored secret."""

import re
from collections.abc import Iterable
from urllib.parse import unquote

MASK = "***"
# Response headers whose values are secrets (the site's session: masked like the project's cookies).
SECRET_RESPONSE_HEADERS = frozenset({"set-cookie", "set-cookie2"})
# Set-Cookie attributes shown as they are; any other name=value is a cookie, its value masked.
COOKIE_ATTRIBUTES = frozenset({"expires", "max-age", "domain", "path", "samesite", "priority"})
COOKIE_FLAGS = frozenset({"secure", "httponly", "partitioned"})
_EXPIRES_TAIL = re.compile(r"\d{1,2}[ -][A-Za-z]{3}[ -]\d{2,4} \d{1,2}:\d{2}:\d{2}( GMT)?")
SHORTEST_SECRET = 4  # masked_secrets leaves shorter strings alone: masking "a" would garble the text


def masked_map(values: dict | None) -> dict[str, str]:
    """Header or cookie names with every value replaced by the mask."""
    return dict.fromkeys(values or {}, MASK)


def unmasked_map(new: dict, stored: dict | None) -> dict:
    """`new`, where a value that is still the mask keeps the stored value of that name."""
    stored = stored or {}
    return {name: stored[name] if value == MASK and name in stored else value for name, value in new.items()}


def masked_request(request: dict | None) -> dict:
    """A frontier row's own request (a seed's or a spider's) as people see it: its header and cookie
    values and its body masked, its own proxy's credentials too (masked_url), the method and
    everything else as they are."""
    shown = dict(request or {})
    if isinstance(shown.get("proxy"), str):
        shown["proxy"] = masked_url(shown["proxy"])
    for name in ("headers", "cookies"):
        if isinstance(shown.get(name), dict):
            shown[name] = masked_map(shown[name])
    if shown.get("body"):
        shown["body"] = MASK
    return shown


def masked_set_cookie(value: str) -> str:
    """A Set-Cookie value (or several, joined with ", ") with every cookie's value masked: the names
    and the attributes (Path, Domain, Expires, ...) stay. A part that is neither is masked whole."""
    shown = []
    for separator, part in _cookie_parts(value):
        name, equals, _ = part.strip().partition("=")
        known = name.strip().lower() in COOKIE_ATTRIBUTES if equals else _harmless_flag(part)
        shown.append(separator + (part if known else (f"{name.strip()}={MASK}" if equals else MASK)))
    return "".join(shown)


def _cookie_parts(value: str) -> list[tuple[str, str]]:
    """(separator before it, part) for each part of a Set-Cookie value split on ";" and ","."""
    pieces = re.split(r"([;,]\s*)", value)
    return [("" if i == 0 else pieces[i - 1], pieces[i]) for i in range(0, len(pieces), 2)]


def _harmless_flag(part: str) -> bool:
    text = part.strip()
    return not text or text.lower() in COOKIE_FLAGS or bool(_EXPIRES_TAIL.fullmatch(text))


def masked_response_headers(headers: dict | None) -> dict:
    """A response's headers as people see them: the cookies a site sets masked (masked_set_cookie)."""
    return {
        name: masked_set_cookie(str(value)) if name.lower() in SECRET_RESPONSE_HEADERS else value
        for name, value in (headers or {}).items()
    }


def _split_url(url: str) -> tuple[str, str | None, str, str]:
    """(scheme with "://", userinfo (None without an "@"), host and port, the rest from the first
    / ? or #)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    userinfo, at, hostport = authority.rpartition("@")
    return scheme + sep, userinfo if at else None, hostport, tail


def masked_url(url: str) -> str:
    """The URL with its password masked (user:***@host); a user name alone, often a token, is masked whole."""
    scheme, userinfo, hostport, tail = _split_url(url)
    if userinfo is None:
        return url
    user, colon, _password = userinfo.partition(":")
    return f"{scheme}{f'{user}:{MASK}' if colon else MASK}@{hostport}{tail}"


def masked_webhook_url(url: str) -> str:
    """A webhook's URL: masked_url, and its path and query masked too (/***), where Slack, Discord
    and Teams keep the secret; a URL with no path and no query keeps its "/"."""
    shown = masked_url(url)
    tail = _split_url(shown)[3]
    if tail in ("", "/"):
        return shown
    return shown[: len(shown) - len(tail)] + f"/{MASK}"


def unmasked_url(new: str, stored: str) -> str:
    """The stored URL when `new` is a masked form of it (sent back unchanged), else `new`."""
    return stored if stored and new in (masked_url(stored), masked_webhook_url(stored)) else new


def _is_webhook(url: str) -> bool:
    return url.lower().startswith(("http://", "https://"))


def masked_config(config):
    """A sink's config with the credentials of its "url" masked (a redis or http sink's; an http
    sink's path and query too), and its "secret" (an http sink's signing key)."""
    if not isinstance(config, dict):
        return config
    shown = dict(config)
    url = shown.get("url")
    if isinstance(url, str):
        shown["url"] = masked_webhook_url(url) if _is_webhook(url) else masked_url(url)
    if shown.get("secret"):
        shown["secret"] = MASK
    return shown


def unmasked_config(new, stored: dict | None):
    """`new`, whose "url" gets the stored credentials back when it is still their masked form, and
    whose "secret" the stored one when it is still the mask."""
    stored = stored or {}
    if not isinstance(new, dict):
        return new
    kept = dict(new)
    if isinstance(new.get("url"), str) and isinstance(stored.get("url"), str):
        kept["url"] = unmasked_url(new["url"], stored["url"])
    if new.get("secret") == MASK and stored.get("secret"):
        kept["secret"] = stored["secret"]
    return kept


def url_secrets(url: str) -> list[str]:
    """The parts of a URL masked_webhook_url hides (user info, password, path and query), as they
    may be written out elsewhere (an error message quoting the URL), decoded and not."""
    _, userinfo, _, tail = _split_url(url)
    user, _, password = (userinfo or "").partition(":")
    parts = [password, tail.lstrip("/"), user if not password else ""]
    return [p for part in parts if part for p in {part, unquote(part)}]


def config_secrets(config) -> list[str]:
    """What a sink's config keeps secret: its "url"'s credentials (and path and query) and its "secret"."""
    if not isinstance(config, dict):
        return []
    found = url_secrets(config["url"]) if isinstance(config.get("url"), str) else []
    return found + ([str(config["secret"])] if config.get("secret") else [])


def masked_secrets(text: str, secrets: Iterable[str]) -> str:
    """`text` (an error message, a log line) with each of `secrets` masked wherever it appears,
    the longest first, so a secret inside a longer one never leaves a part of the longer one behind."""
    for secret in sorted({s for s in secrets if len(s) >= SHORTEST_SECRET}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text
