"""A project's media rules: which references become downloads, and with which downloader. Pure."""

from dataclasses import dataclass
from urllib.parse import urlsplit

from core.patterns import UserPattern

STREAM_EXTENSIONS = (".m3u8", ".mpd")


@dataclass(frozen=True)
class MediaRules:
    kinds: frozenset[str] = frozenset({"image", "video", "audio"})
    extensions: tuple[str, ...] = ()
    mime_types: tuple[str, ...] = ()
    max_bytes: int = 200 * 1024 * 1024
    any_host: bool = False
    page_patterns: tuple[UserPattern, ...] = ()  # matched with a time limit (core/patterns.py)
    gallery_patterns: tuple[UserPattern, ...] = ()

    @classmethod
    def build(cls, *, kinds, extensions=(), mime_types=(), page_patterns=(), gallery_patterns=(), **rest):
        return cls(
            kinds=frozenset(k.strip().lower() for k in kinds if k.strip()),
            extensions=tuple("." + e.strip().lower().lstrip(".") for e in extensions if e.strip()),
            mime_types=tuple(m.strip().lower() for m in mime_types if m.strip()),
            page_patterns=tuple(UserPattern(p) for p in page_patterns),
            gallery_patterns=tuple(UserPattern(p) for p in gallery_patterns),
            **rest,
        )

    def wants(self, url: str, kind: str) -> bool:
        """Whether a reference of this kind at this URL should be downloaded at all."""
        if kind not in self.kinds:
            return False
        if not self.extensions or self.downloader_for(url) != "http":
            return True
        return urlsplit(url).path.lower().endswith(self.extensions)

    def mime_allowed(self, mime: str) -> bool:
        if not self.mime_types or not mime:
            return True
        major = mime.split("/", 1)[0] + "/*"
        return mime in self.mime_types or major in self.mime_types

    def downloader_for(self, url: str) -> str:
        """yt-dlp for video pages and streaming manifests, gallery-dl for gallery pages, else HTTP."""
        if any(p.search(url) for p in self.gallery_patterns):
            return "gallerydl"
        if any(p.search(url) for p in self.page_patterns):
            return "ytdlp"
        if urlsplit(url).path.lower().endswith(STREAM_EXTENSIONS):
            return "ytdlp"
        return "http"

    def media_page_kind(self, url: str) -> str | None:
        """A page that is itself media to download: "image" for galleries, "video" for video pages."""
        if any(p.search(url) for p in self.gallery_patterns):
            return "image"
        if any(p.search(url) for p in self.page_patterns):
            return "video"
        return None
