"""Signatures of the HTTP sink's requests. Pure: no Django, no network.

A request carries `X-Crawlhub-Timestamp` (Unix seconds) and `X-Crawlhub-Signature:
sha256=<hex>`, the HMAC-SHA256, keyed with the sink's secret, of the timestamp, a dot, and the
body's bytes. A receiver recomputes it over the body as received, compares in constant time, and
refuses a timestamp far from its own clock (a replayed request)."""

import hashlib
import hmac
import re
import time

TIMESTAMP_HEADER = "X-Crawlhub-Timestamp"
SIGNATURE_HEADER = "X-Crawlhub-Signature"
MIN_SECRET_LENGTH = 16
_TIMESTAMP = re.compile(r"[0-9]{1,12}")  # ASCII digits: str.isdigit() takes "²", which int() refuses


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """`sha256=<hex of HMAC-SHA256(secret, timestamp + "." + body)>`."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def signed_headers(secret: str, body: bytes, *, now: float | None = None) -> dict[str, str]:
    timestamp = str(int(time.time() if now is None else now))
    return {TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: signature(secret, timestamp, body)}


def signature_valid(secret: str, headers, body: bytes, *, tolerance: float = 300, now: float | None = None) -> bool:
    """Whether the request's signature is the secret's and its timestamp within `tolerance` seconds
    (`headers`: any mapping; names are matched in any case). Never raises on what a request
    carries: a malformed timestamp or a non-ASCII signature is simply not valid."""
    named = {str(name).lower(): str(value) for name, value in dict(headers).items()}
    timestamp = named.get(TIMESTAMP_HEADER.lower(), "")
    given = named.get(SIGNATURE_HEADER.lower(), "")
    if not _TIMESTAMP.fullmatch(timestamp) or abs((time.time() if now is None else now) - int(timestamp)) > tolerance:
        return False
    if not given.isascii():  # compare_digest raises on a non-ASCII str; no such signature is ours
        return False
    return hmac.compare_digest(given, signature(secret, timestamp, body))
