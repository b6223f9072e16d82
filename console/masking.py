"""Secrets shown masked and written back unchanged: header and cookie values, and the credentials in
a URL (user:password@). Pure functions: the API and the admin show `masked_*` and pass what comes
back through `unmasked_*`, so a form or a PUT that returns the mask keeps the stored secret."""

MASK = "***"


def masked_map(values: dict | None) -> dict[str, str]:
    """Header or cookie names with every value replaced by the mask."""
    return dict.fromkeys(values or {}, MASK)


def unmasked_map(new: dict, stored: dict | None) -> dict:
    """`new`, where a value that is still the mask keeps the stored value of that name."""
    stored = stored or {}
    return {name: stored[name] if value == MASK and name in stored else value for name, value in new.items()}


def masked_request(request: dict | None) -> dict:
    """A frontier row's own request (a seed's or a spider's) as people see it: its header and cookie
    values and its body masked, the method and everything else as they are."""
    shown = dict(request or {})
    for name in ("headers", "cookies"):
        if isinstance(shown.get(name), dict):
            shown[name] = masked_map(shown[name])
    if shown.get("body"):
        shown["body"] = MASK
    return shown


def masked_url(url: str) -> str:
    """The URL with its password masked (user:***@host); a user name alone, often a token, is masked whole."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    userinfo, at, hostport = authority.rpartition("@")
    if not at:
        return url
    user, colon, _password = userinfo.partition(":")
    userinfo = f"{user}:{MASK}" if colon else MASK
    return f"{scheme}{sep}{userinfo}@{hostport}{tail}"


def unmasked_url(new: str, stored: str) -> str:
    """The stored URL when `new` is its masked form (sent back unchanged), else `new`."""
    return stored if stored and new == masked_url(stored) else new


def masked_config(config):
    """A sink's config with the credentials of its "url" (a redis or http sink's) and its "secret"
    (an http sink's signing key) masked."""
    if not isinstance(config, dict):
        return config
    shown = dict(config)
    if isinstance(shown.get("url"), str):
        shown["url"] = masked_url(shown["url"])
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
