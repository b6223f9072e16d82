"""What a file really is, from its first bytes (servers mislabel; HTML error pages pose as videos). Pure."""

SIGNATURES = (
    (0, b"\xff\xd8\xff", "image/jpeg"),
    (0, b"\x89PNG\r\n\x1a\n", "image/png"),
    (0, b"GIF87a", "image/gif"),
    (0, b"GIF89a", "image/gif"),
    (0, b"%PDF-", "application/pdf"),
    (0, b"\x1a\x45\xdf\xa3", "video/webm"),
    (0, b"OggS", "audio/ogg"),
    (0, b"fLaC", "audio/flac"),
    (0, b"ID3", "audio/mpeg"),
    (0, b"#EXTM3U", "application/vnd.apple.mpegurl"),
    (0, b"PK\x03\x04", "application/zip"),
    (4, b"ftyp", "video/mp4"),
)


def sniff_mime(head: bytes) -> str | None:
    """The MIME type the leading bytes prove, or None when they prove nothing."""
    for offset, magic, mime in SIGNATURES:
        if head[offset : offset + len(magic)] == magic:
            return mime
    if head[:4] == b"RIFF" and head[8:12] in (b"WEBP", b"WAVE", b"AVI "):
        return {b"WEBP": "image/webp", b"WAVE": "audio/wav", b"AVI ": "video/x-msvideo"}[head[8:12]]
    if looks_like_html(head):
        return "text/html"
    return None


def looks_like_html(head: bytes) -> bool:
    start = head.lstrip()[:256].lower()
    return start.startswith((b"<!doctype html", b"<html", b"<head", b"<body")) or b"<html" in start[:64]
