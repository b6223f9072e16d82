"""The media downloaders, and the one interface the download stage runs them through.

A project's media rules name an asset's downloader when the asset is found (core/mediarules.py,
`downloader_for`); the download stage looks the name up here. "http" runs on the stage's event loop,
many at once, at each host's slot (media/downloaders/plain_http.py); every other downloader is a program
that opens its own sockets through an egress gate, and runs one asset at a time in a thread of its
host. Adding one: a module here with a class that has `name` and `download`, listed in REGISTRY,
and a rule in core/mediarules.py that names it.
"""

from dataclasses import dataclass, field
from typing import Protocol

from media.downloaders.plain_http import Download

HTTP = "http"


@dataclass(frozen=True)
class Options:
    tmp_dir: str
    max_bytes: int
    socket_timeout: float
    allow_private: bool
    user_agent: str
    proxy: str = ""
    headers: dict = field(default_factory=dict)  # the project's own headers, for its own sites only

    def common(self) -> dict:
        """The keyword arguments every downloader takes."""
        return {
            "tmp_dir": self.tmp_dir,
            "max_bytes": self.max_bytes,
            "socket_timeout": self.socket_timeout,
            "allow_private": self.allow_private,
            "user_agent": self.user_agent,
            "proxy": self.proxy,
        }


class Downloader(Protocol):
    name: str

    def download(self, url: str, options: Options) -> list[Download]:
        """Download into files under options.tmp_dir; never raises (errors come back as codes)."""


class Ytdlp:
    """Video pages and streaming manifests, through yt-dlp as a library."""

    name = "ytdlp"

    def download(self, url: str, options: Options) -> list[Download]:
        from media.downloaders.ytdlp import ytdlp_download  # yt-dlp is heavy to import: only where it is used

        return [ytdlp_download(url, headers=options.headers, **options.common())]


class GalleryDl:
    """Gallery pages, through the gallery-dl program when it is installed (it gets no headers)."""

    name = "gallerydl"

    def download(self, url: str, options: Options) -> list[Download]:
        from media.downloaders.gallerydl import gallerydl_download

        return gallerydl_download(url, **options.common())


REGISTRY: dict[str, Downloader] = {d.name: d for d in (Ytdlp(), GalleryDl())}


def download_with(name: str, url: str, options: Options) -> list[Download]:
    """Run the named downloader (not "http": the stage runs that one on its loop)."""
    downloader = REGISTRY.get(name)
    if downloader is None:
        return [Download(url=url, error_code="unknown_downloader", error_message=f"no downloader {name!r}")]
    return downloader.download(url, options)
