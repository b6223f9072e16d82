"""yt-dlp as a library: options fixed here, every connection through the egress gate, one output file per call.

No Django here. yt-dlp opens its own sockets: its only proxy is a gate of core.net.egress for this
call, which checks the address of every connection it makes (pages, redirects, formats, fragments)
when it connects, and goes on through the project's proxy if it has one. ffmpeg and other external
downloaders would open sockets of their own: only yt-dlp's native protocols are downloaded.
"""

import logging
import math
import mimetypes
import os
import re
import shutil
import tempfile
from urllib.parse import urlsplit

import yt_dlp

from core.net.egress import gate
from media.downloaders.plain_http import Download, file_sha256

log = logging.getLogger(__name__)

RETRIES = 2
# Downloaded by yt-dlp's own code (so through its proxy, the gate); ffmpeg, rtmpdump and friends
# would open sockets of their own.
NATIVE_PROTOCOLS = frozenset({"http", "https", "m3u8", "m3u8_native", "http_dash_segments"})
METADATA_KEYS = ("title", "duration", "format_id", "ext", "extractor", "width", "height", "webpage_url")
JSON_SCALARS = (str, int, float, bool)


class Refused(Exception):
    """A refusal of ours, raised before or inside yt-dlp's run; error_code says which."""

    def __init__(self, error_code: str, message: str):
        super().__init__(message)
        self.error_code = error_code


class ByteCap:
    """Progress hook: max_filesize only checks Content-Length, so count what actually arrives
    (summed over the files of a merge; HLS/DASH estimates count too)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._seen: dict[str, int] = {}

    def __call__(self, status: dict) -> None:
        if status.get("status") != "downloading":
            return
        keys = ("downloaded_bytes", "total_bytes", "total_bytes_estimate")
        self._seen[status.get("filename", "")] = int(max(status.get(k) or 0 for k in keys))
        if sum(self._seen.values()) > self.max_bytes:
            raise Refused("body_too_large", f"media exceeds the {self.max_bytes}-byte cap")


class YtdlpLogger:
    """yt-dlp's messages into python logging. Failures come back in the Download, so yt-dlp's
    errors and warnings are logged at info level, its chatter at debug."""

    def __init__(self):
        self.max_filesize_hit = False

    def debug(self, message: str) -> None:
        if "larger than max-filesize" in message:
            self.max_filesize_hit = True
        log.debug("yt-dlp: %s", message)

    def info(self, message: str) -> None:
        log.debug("yt-dlp: %s", message)

    def warning(self, message: str) -> None:
        log.info("yt-dlp: %s", message)

    def error(self, message: str) -> None:
        log.info("yt-dlp: %s", message)


def ytdlp_download(
    url: str,
    *,
    tmp_dir: str,
    max_bytes: int,
    socket_timeout: float,
    allow_private: bool,
    user_agent: str,
    proxy: str = "",
    headers: dict | None = None,
) -> Download:
    """Download the one video behind url; never raises. `headers`: sent with yt-dlp's requests
    besides the User-Agent (the project's, for its own sites: a Cookie among them is bound by
    yt-dlp to the URL's domain).

    On success `path` is a file directly under tmp_dir (`ytdlp-*.<ext>`) and nothing else is left
    behind, so Download.discard() cleans up completely. On failure nothing is left at all; a failure
    after the gate refused a connection is blocked_address, whatever yt-dlp made of the refusal.
    """
    result, work_dir = Download(url=url), ""
    try:
        _check_url(url)
        with gate(allow_private=allow_private, upstream=proxy) as way_out:
            try:
                work_dir = tempfile.mkdtemp(dir=tmp_dir, prefix="ytdlp-")
                logger = YtdlpLogger()
                params = _params(work_dir, max_bytes, socket_timeout, user_agent, logger) | {"proxy": way_out.url}
                params["http_headers"] = {**(headers or {}), "User-Agent": user_agent}
                info = _run(url, params)
                output = _output_path(info, work_dir, max_bytes, logger)
                _adopt(result, output, info, tmp_dir, max_bytes)
            except Exception as exc:
                if way_out.refusals:  # what yt-dlp saw was the gate's 403: say what it was
                    raise Refused("blocked_address", way_out.refusals[0]) from exc
                raise
    except Exception as exc:
        result.error_code, result.error_message = _classify(exc)
        result.status_code = _http_status(result.error_message) if result.error_code == "ytdlp_error" else None
        if result.status_code:  # a 429 or 5xx is transient, and tells the host's politeness to slow down
            result.error_code = f"http_{result.status_code}"
        result.discard()
    finally:
        if work_dir:
            shutil.rmtree(work_dir, ignore_errors=True)
    return result


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refused("invalid_url", f"not an http(s) URL: {url[:200]}")


def _params(work_dir: str, max_bytes: int, socket_timeout: float, user_agent: str, logger) -> dict:
    # Built here only: nothing from the page or the user reaches these options.
    return {
        "paths": {"home": work_dir, "temp": work_dir},
        "outtmpl": {"default": "%(id).60s.%(ext)s"},
        "restrictfilenames": True,
        "noplaylist": True,
        "playlist_items": "1",
        "format": _format_spec(),
        "max_filesize": max_bytes,
        "progress_hooks": [ByteCap(max_bytes)],
        "socket_timeout": socket_timeout,
        "retries": RETRIES,
        "fragment_retries": RETRIES,
        "extractor_retries": RETRIES,
        "concurrent_fragment_downloads": 1,
        "external_downloader": {"default": "native"},
        "http_headers": {"User-Agent": user_agent},
        "cookiefile": None,
        "cachedir": False,
        "remote_components": [],
        "quiet": True,
        "no_warnings": True,
        "noprogress": True,
        "color": "no_color",
        "logger": logger,
    }


def _format_spec() -> str:
    # One file with both audio and video; else best video + best audio merged by ffmpeg (a local
    # process, no network) when it is installed; else whatever single file is best.
    if shutil.which("ffmpeg"):
        return "best[vcodec!=none][acodec!=none]/bestvideo*+bestaudio/best"
    return "best[vcodec!=none][acodec!=none]/best"


def _run(url: str, params: dict) -> dict:
    with yt_dlp.YoutubeDL(params) as ydl:
        info = _single_video(ydl.extract_info(url, download=False))
        chosen = info.get("requested_formats") or [info]
        _check_formats(chosen)
        ids = {f.get("format_id") for f in chosen}
        # The download pass re-runs format selection: let it choose only among checked formats.
        info["formats"] = [f for f in info.get("formats") or [info] if f.get("format_id") in ids]
        return ydl.process_ie_result(info, download=True)


def _single_video(info: dict) -> dict:
    while info.get("_type") in ("playlist", "multi_video"):
        entries = [e for e in info.get("entries") or [] if e]
        if not entries:
            raise Refused("ytdlp_error", "no video found")
        info = entries[0]
    if info.get("is_live"):
        raise Refused("ytdlp_error", "live streams are not downloaded")
    return info


def _check_formats(formats: list[dict]) -> None:
    for fmt in formats:
        if fmt.get("protocol") not in NATIVE_PROTOCOLS:
            raise Refused("ytdlp_error", f"protocol {fmt.get('protocol')!r} is not downloaded")


def _output_path(info: dict, work_dir: str, max_bytes: int, logger: YtdlpLogger) -> str:
    downloads = info.get("requested_downloads") or [{}]
    path = os.path.realpath(downloads[0].get("filepath") or work_dir)
    if os.path.isfile(path) and path.startswith(os.path.realpath(work_dir) + os.sep):
        return path
    if logger.max_filesize_hit:
        raise Refused("body_too_large", f"declared size exceeds the {max_bytes}-byte cap")
    raise Refused("ytdlp_error", "yt-dlp produced no file")


def _adopt(result: Download, output: str, info: dict, tmp_dir: str, max_bytes: int) -> None:
    """Move the output file directly under tmp_dir and describe it in result."""
    size = os.path.getsize(output)
    if size > max_bytes:
        raise Refused("body_too_large", f"media exceeds the {max_bytes}-byte cap")
    if _looks_like_html(output):
        raise Refused("unexpected_html", "yt-dlp returned an HTML page, not media")
    ext = os.path.splitext(output)[1].lower()
    fd, result.path = tempfile.mkstemp(
        dir=tmp_dir, prefix="ytdlp-", suffix=ext if re.fullmatch(r"\.[a-z0-9]{1,10}", ext) else ""
    )
    os.close(fd)
    os.replace(output, result.path)
    result.status_code, result.size, result.sha256 = 200, size, file_sha256(result.path)
    result.mime = mimetypes.guess_type(result.path)[0] or "application/octet-stream"
    result.metadata = {k: info[k] for k in METADATA_KEYS if _is_json_scalar(info.get(k))}


def _is_json_scalar(value) -> bool:
    # NaN and infinities are not JSON (PostgreSQL's jsonb refuses them).
    return isinstance(value, JSON_SCALARS) and not (isinstance(value, float) and not math.isfinite(value))


def _looks_like_html(path: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(512).lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html", b"<head", b"<body"))


def _classify(exc: BaseException) -> tuple[str, str]:
    refusal = _find_refusal(exc)
    if refusal is not None:
        return refusal.error_code, str(refusal)
    if isinstance(exc, yt_dlp.utils.YoutubeDLError):
        return "ytdlp_error", _one_line(str(exc))
    return "ytdlp_error", f"{exc.__class__.__name__}: {_one_line(str(exc))}"


def _find_refusal(exc: BaseException | None) -> Refused | None:
    """Our refusal, also when yt-dlp wrapped it (DownloadError keeps the original in exc_info)."""
    for _ in range(5):
        if exc is None or isinstance(exc, Refused):
            return exc
        wrapped = getattr(exc, "exc_info", None)
        exc = (wrapped[1] if wrapped and wrapped[1] is not exc else None) or exc.__cause__ or exc.__context__
    return None


def _http_status(message: str) -> int | None:
    """The HTTP status yt-dlp reports in its error ("HTTP Error 429: Too Many Requests"), if any."""
    found = re.search(r"HTTP Error (\d{3})", message)
    return int(found.group(1)) if found else None


def _one_line(message: str) -> str:
    message = message.strip().removeprefix("ERROR: ").split("; please report this issue", 1)[0]
    return (message.splitlines() or [""])[0][:500]
