"""Property tests (hypothesis) for two edges the fault suite names: charset decoding of fetched
pages and the names media files are stored under. (The canonicalizer's idempotence and the link
extractor's properties are in test_urls.py and test_extractors.py.)"""

import posixpath

from hypothesis import given, settings
from hypothesis import strategies as st

from core.storage import key_for
from scrape.extractors import _as_utf8, extract_html

CHARSETS = st.one_of(
    st.sampled_from(["utf-8", "utf_8", "latin_1", "windows-1252", "shift_jis", "euc_jp", "utf-16", "cp437", "idna"]),
    st.text(max_size=20),
)


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=500), charset=CHARSETS)
def test_decoding_never_raises_and_gives_utf8_when_it_says_so(body, charset):
    try:
        "".encode(charset)
    except (LookupError, ValueError):
        charset = None  # what _known_charset hands over for a name Python does not know
    decoded, encoding = _as_utf8(body, charset)
    if encoding == "utf-8":
        decoded.decode("utf-8")  # strictly valid
    else:
        assert (decoded, encoding) == (body, None)  # left to lxml's own sniffing


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200), charset=st.sampled_from(["utf-8", "latin_1", "shift_jis", "windows-1252"]))
def test_text_in_a_declared_charset_reads_back_as_the_same_text(text, charset):
    try:
        body = text.encode(charset)
    except UnicodeEncodeError:
        return
    if body.decode(charset) != text:
        return  # the codec itself does not round-trip it (shift_jis writes "¥" as the byte of "\\")
    if body.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        return  # a byte order mark wins over the declared charset, as in browsers
    decoded, encoding = _as_utf8(body, charset)
    assert encoding == "utf-8"
    assert decoded.decode("utf-8") == text


@settings(max_examples=200, deadline=None)
@given(title=st.text(max_size=80), charset=st.sampled_from(["utf-8", "latin_1", "shift_jis", "windows-1252"]))
def test_a_page_title_survives_its_declared_charset(title, charset):
    clean = "".join(c for c in title if c.isprintable() and not 0xD800 <= ord(c) <= 0xDFFF)
    clean = " ".join(clean.replace("<", " ").replace("&", " ").split())
    html = f"<html><head><title>{clean}</title></head><body>x</body></html>"
    try:
        body = html.encode(charset)
    except UnicodeEncodeError:
        return
    if body.decode(charset) != html:
        return  # the codec itself does not round-trip it (shift_jis writes "¥" as the byte of "\\")
    assert extract_html(body, "http://example.com/", charset=charset).title == clean.strip()


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=80), st.text(alphabet="0123456789abcdef./\\", min_size=60, max_size=70)))
def test_a_storage_name_is_a_sha256_path_or_refused(name):
    """Stored files are named by their content hash only; anything else (a remote file name, a
    `../` from Content-Disposition) is refused, so no name can leave the storage's sha256/ tree."""
    try:
        key = key_for(name)
    except ValueError:
        return
    assert key == posixpath.normpath(key)
    assert key.startswith("sha256/")
    assert ".." not in key.split("/")
    assert key.rsplit("/", 1)[1] == name
