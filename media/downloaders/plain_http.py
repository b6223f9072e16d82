"""Plain HTTP download into a temp file: streamed, hashed while streaming, size-capped.

No Django here. Redirects are followed by hand so each hop passes the client's address guard.
"""

import asyncio
import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from core.net.client import ACCEPT_ENCODING, FetchLimits, check_egress_answer, classify_error, iter_capped

MAX_HOPS = 5


@dataclass
class Download:
    url: str
    status_code: int | None = None
    path: str = ""
    sha256: str = ""
    size: int = 0
    mime: str = ""
    error_code: str = ""
    error_message: str = ""
    metadata: dict = field(default_factory=dict)
    retry_after: str = ""  # a 429/503 answer's Retry-After header: the host's politeness holds it back

    def discard(self) -> None:
        if self.path and os.path.exists(self.path):
            os.unlink(self.path)
        self.path = ""


async def download(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: dict,
    limits: FetchLimits,
    tmp_dir: str,
    secret_headers: dict | None = None,
    secrets_allowed: Callable[[str], bool] | None = None,
) -> Download:
    """GET url into a temp file under tmp_dir; never raises, and leaves no file behind on failure.
    `secret_headers` (the project's headers and cookies) go only to the URLs `secrets_allowed`
    accepts, checked again at each redirect hop."""
    result = Download(url=url)
    fd, result.path = tempfile.mkstemp(dir=tmp_dir, prefix="download-", suffix=".part")
    secrets = (secret_headers or {}, secrets_allowed or (lambda _url: False))
    try:
        with os.fdopen(fd, "wb") as sink:
            async with asyncio.timeout(limits.total_timeout):
                await _follow(client, url, headers, limits, sink, result, secrets)
    except Exception as exc:
        result.error_code, result.error_message = classify_error(exc, limits)
    if result.error_code:
        result.discard()
    return result


async def _follow(client, url, headers, limits, sink, result: Download, secrets) -> None:
    timeout = httpx.Timeout(limits.read_timeout, connect=limits.connect_timeout)
    headers = {"Accept-Encoding": ACCEPT_ENCODING, **headers}
    secret_headers, secrets_allowed = secrets
    for _ in range(MAX_HOPS + 1):
        hop_headers = {**headers, **secret_headers} if secret_headers and secrets_allowed(url) else headers
        async with client.stream("GET", url, headers=hop_headers, timeout=timeout) as r:
            check_egress_answer(client, r)
            result.status_code = r.status_code
            if r.is_redirect and "location" in r.headers:
                url = str(r.url.join(r.headers["location"]))
                continue
            if r.status_code >= 400:
                result.error_code, result.error_message = f"http_{r.status_code}", f"HTTP {r.status_code}"
                result.retry_after = r.headers.get("retry-after", "")[:100]
                return
            result.mime = r.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            await _write(r, sink, result, limits.max_bytes)
            return
    result.error_code, result.error_message = "too_many_redirects", f"more than {MAX_HOPS} redirects"


async def _write(r: httpx.Response, sink, result: Download, max_bytes: int) -> None:
    digest, size = hashlib.sha256(), 0
    async for chunk in iter_capped(r, max_bytes):
        size += len(chunk)
        digest.update(chunk)
        sink.write(chunk)
    result.sha256, result.size = digest.hexdigest(), size


def file_sha256(path: str) -> str:
    """sha256 of a file on disk, read 1 MiB at a time (yt-dlp and gallery-dl outputs)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
