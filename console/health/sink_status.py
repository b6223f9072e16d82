"""How a sink is doing, as every surface shows it (the API, `manage.py sinks`, the sink failing
monitor): what it owes, its last error with the sink's secrets masked, and since when it fails."""

from urllib.parse import urlsplit

from console.masking import MASK, masked_url
from sinks.delivery import sink_counts, sink_last_error
from sinks.models import Sink


def sink_status(sink: Sink) -> dict:
    """{"counts", "last_error" (masked), "failing_since" (None while it delivers)}."""
    return {
        "counts": sink_counts(sink),
        "last_error": sink_error_masked(sink, sink_last_error(sink)),
        "failing_since": sink.failing_since,
    }


def sink_error_masked(sink: Sink, error: str) -> str:
    """The error with the secrets of the sink's config masked wherever it quotes them: its URL as
    masked_url shows it, the URL's password, and an http sink's signing secret."""
    config = sink.config if isinstance(sink.config, dict) else {}
    url, secret = config.get("url"), config.get("secret")
    if isinstance(url, str) and url:
        error = error.replace(url, masked_url(url))
        password = _password(url)
        if password:
            error = error.replace(password, MASK)
    if isinstance(secret, str) and secret:
        error = error.replace(secret, MASK)
    return error


def _password(url: str) -> str:
    try:
        return urlsplit(url).password or ""
    except ValueError:
        return ""
