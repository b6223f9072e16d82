"""Run the right downloader for each claimed asset and vet what came back. Nothing is stored here."""

import asyncio
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from django.conf import settings

from crawl.fetcher import runner
from crawl.models import Project
from crawl.services.fetching import allows_private, fetch_limits, user_agent_of
from crawl.urls import parse_lines

from .downloader import Download, download
from .models import MediaAsset
from .rules import MediaRules
from .sniff import sniff_mime

HTTP_CONCURRENCY = 4
_RULES: dict[int, tuple[float, MediaRules]] = {}


def project_media_rules(project: Project) -> MediaRules:
    """The project's media rules (cached briefly per process, like its scope)."""
    cached = _RULES.get(project.id)
    if cached and time.monotonic() - cached[0] < 30:
        return cached[1]
    rules = MediaRules.build(
        kinds=project.media_kinds.split(","),
        extensions=parse_lines(project.media_extensions),
        mime_types=parse_lines(project.media_mime_types),
        page_patterns=parse_lines(project.media_page_patterns),
        gallery_patterns=parse_lines(project.gallery_page_patterns),
        max_bytes=project.media_max_bytes or settings.CRAWL_MAX_MEDIA_BYTES,
        any_host=project.media_any_host,
    )
    _RULES[project.id] = (time.monotonic(), rules)
    return rules


@dataclass
class Fetched:
    """What the downloader produced for one asset: one file, or several for a gallery."""

    asset: MediaAsset
    files: list[Download] = field(default_factory=list)


def temp_dir() -> Path:
    path = Path(settings.VAR_DIR) / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    return path


def clean_stale_temp(older_than: float) -> int:
    """Remove temp files and folders older than a lease: what killed downloads left behind."""
    removed, cutoff = 0, time.time() - older_than
    for entry in temp_dir().iterdir():
        try:
            if _last_write(entry) < cutoff:
                _remove(entry)
                removed += 1
        except FileNotFoundError:  # its own download finished and removed it meanwhile
            continue
    return removed


def _last_write(path: Path) -> float:
    """A folder is as fresh as the newest file in it (a running yt-dlp download keeps writing)."""
    if not path.is_dir():
        return path.stat().st_mtime
    return max([path.stat().st_mtime, *(_last_write(child) for child in path.iterdir())])


def _remove(path: Path) -> None:
    if path.is_dir():
        for child in path.iterdir():
            _remove(child)
        path.rmdir()
    else:
        path.unlink(missing_ok=True)


def download_assets(assets: list[MediaAsset]) -> list[Fetched]:
    """Download every asset with its downloader: HTTP ones concurrently, the others one by one."""
    tmp = str(temp_dir())
    http = [a for a in assets if a.downloader == "http"]
    results = dict(zip([a.id for a in http], runner.run(_http_all(http, tmp)), strict=True)) if http else {}
    fetched = []
    for asset in assets:
        rules = project_media_rules(asset.project)
        files = [results[asset.id]] if asset.id in results else _run_other(asset, rules, tmp)
        fetched.append(Fetched(asset=asset, files=[vet(f, asset.kind, rules) for f in files]))
    return fetched


async def _http_all(assets: list[MediaAsset], tmp: str) -> list[Download]:
    gate = asyncio.Semaphore(HTTP_CONCURRENCY)

    async def one(asset: MediaAsset) -> Download:
        rules = project_media_rules(asset.project)
        limits = replace(fetch_limits(), max_bytes=rules.max_bytes, total_timeout=settings.CRAWL_MEDIA_TOTAL_TIMEOUT)
        client = runner.client(allow_private=allows_private(asset.project), proxy=asset.project.proxy)
        async with gate:
            headers = {"User-Agent": user_agent_of(asset.project)}
            return await download(client, asset.url, headers=headers, limits=limits, tmp_dir=tmp)

    return await asyncio.gather(*(one(a) for a in assets))


def _run_other(asset: MediaAsset, rules: MediaRules, tmp: str) -> list[Download]:
    options = {
        "tmp_dir": tmp,
        "max_bytes": rules.max_bytes,
        "socket_timeout": settings.CRAWL_READ_TIMEOUT,
        "allow_private": allows_private(asset.project),
        "user_agent": user_agent_of(asset.project),
        "proxy": asset.project.proxy,
    }
    if asset.downloader == "ytdlp":
        from .ytdlp import ytdlp_download  # yt-dlp is heavy to import: only where it is used

        return [ytdlp_download(asset.url, **options)]
    if asset.downloader == "gallerydl":
        from .gallerydl import gallerydl_download

        return gallerydl_download(asset.url, **options)
    return [
        Download(url=asset.url, error_code="unknown_downloader", error_message=f"no downloader {asset.downloader!r}")
    ]


def vet(result: Download, kind: str, rules: MediaRules) -> Download:
    """Refuse an HTML page served where media was expected, and MIME types the rules exclude.
    The stored MIME type is the one the bytes prove, else the server's."""
    if result.error_code or not result.path:
        return result
    with open(result.path, "rb") as handle:
        sniffed = sniff_mime(handle.read(512))
    result.mime = sniffed or result.mime
    if sniffed == "text/html" and kind != "file":
        return _refuse(result, "unexpected_html", f"expected {kind}, got an HTML page")
    if not rules.mime_allowed(result.mime):
        return _refuse(result, "mime_not_allowed", f"{result.mime} is not in the project's MIME types")
    return result


def _refuse(result: Download, code: str, message: str) -> Download:
    result.discard()
    result.error_code, result.error_message = code, message
    return result
