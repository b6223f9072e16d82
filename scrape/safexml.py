"""Fetched XML refused before any parser reads it: documents that declare entities (billion laughs,
XXE), and documents in an encoding that could hide such a declaration from a search of the bytes
(UTF-7 writes "<!ENTITY" as "+ADw-+ACE-ENTITY"; EBCDIC has other bytes for every letter). Pure."""

import codecs
import functools
import re

_ENTITY_DECLARATION = re.compile(rb"<!\s*ENTITY", re.IGNORECASE)
_DECLARED_ENCODING = re.compile(rb"<\?xml[^>]{0,200}?\bencoding\s*=\s*[\"']([^\"']{0,60})[\"']")
_HEAD_BYTES = 1024
_LEADING = b"\xef\xbb\xbf\xff\xfe \t\r\n"  # byte order marks (once NULs are dropped) and whitespace
# What markup is made of: an encoding is searchable when no bytes but their ASCII ones decode to these.
_MARKUP = "<!ENTITY%&;\"'[]>?="
_ASCII = bytes(range(128))
_WIDE = ("utf-16", "utf-32")  # searched with their NULs dropped


def unsafe_xml(body: bytes) -> bool:
    """Whether the document declares entities anywhere (not just in the prolog a comment can hide it
    in), or declares an encoding whose markup a search of the bytes cannot see. UTF-16 and UTF-32
    are searched with their NULs dropped."""
    if _ENTITY_DECLARATION.search(body):
        return True
    narrow = body.replace(b"\x00", b"") if b"\x00" in body else body
    if narrow is not body and _ENTITY_DECLARATION.search(narrow):
        return True
    return not _searchable(declared_encoding(narrow))


def declared_encoding(body: bytes) -> str | None:
    """The encoding named by the XML declaration at the head of the (NUL-free) body, or None."""
    found = _DECLARED_ENCODING.match(body[:_HEAD_BYTES].lstrip(_LEADING))
    return found.group(1).decode("ascii", "replace").strip() if found else None


def _searchable(encoding: str | None) -> bool:
    """Whether a search of the bytes sees markup written in this encoding; unknown encodings are not."""
    if encoding is None:  # UTF-8, or UTF-16/32 by their byte order mark
        return True
    try:
        name = codecs.lookup(encoding).name
    except LookupError:  # unknown to Python, maybe known to libxml2 (IBM1047 is EBCDIC, JAVA reads \u003c)
        return False
    return name.startswith(_WIDE) or (not name.endswith("unicode-escape") and _keeps_ascii(name))


@functools.cache
def _keeps_ascii(name: str) -> bool:
    """Whether ASCII bytes decode as themselves and no other byte decodes to markup: true of UTF-8,
    Latin-1 and the Windows, Mac and CJK code pages; false of UTF-7 and EBCDIC."""
    try:
        if _ASCII.decode(name) != _ASCII.decode("ascii"):
            return False
        return not any(char in _MARKUP for byte in range(128, 256) for char in bytes([byte]).decode(name, "ignore"))
    except (UnicodeError, ValueError, TypeError, LookupError):
        return False
