"""Host names as browsers read them (the URL standard's host parser): percent-decoded, mapped by
UTS 46, refused when they hold a character no host may hold, and numeric IPv4 forms written out.
Pure: no Django, no network."""

import ipaddress
import re
from urllib.parse import unquote

import idna
from publicsuffixlist import PublicSuffixList

# The URL standard's forbidden domain code points: C0 controls, space and # % / : < > ? @ [ \ ] ^ | DEL.
_FORBIDDEN = re.compile(r"[\x00-\x20#%/:<>?@\[\\\]^|\x7f]")
# The public suffix list bundled with the package (publicsuffixlist): never downloaded at run time.
_PUBLIC_SUFFIXES = PublicSuffixList()
_DIGITS = {8: frozenset("01234567"), 10: frozenset("0123456789"), 16: frozenset("0123456789abcdefABCDEF")}


class BadHost(ValueError):
    """A host name a browser refuses."""


def browser_host(host: str) -> str:
    """The ASCII host a browser contacts for `host` (as urlsplit's hostname gives it, lowercased),
    or BadHost. "%41.com" is "a.com", "fa\u00df.example" is "xn--fa-hia.example" (not IDNA 2003's
    "fass"), "0x7f.1" is "127.0.0.1"; "a b.com", "\ufdd0.com" and "1.2.3.256" are refused."""
    if "%" in host:
        host = unquote(host)  # bytes that are not UTF-8 become U+FFFD, which UTS 46 refuses
    if not host.isascii():
        host = _uts46(host)
    if _FORBIDDEN.search(host):
        raise BadHost(f"host {host!r} holds a character no host may hold")
    host = host.lower().rstrip(".")
    if not host:
        raise BadHost("empty host")
    return _ipv4(host) if _ends_in_number(host) else host


def _uts46(host: str) -> str:
    """UTS 46 processing, non-transitional, as browsers do. A label IDNA 2008 refuses but UTS 46
    allows (an emoji: "\u2603.net") is still Punycode-encoded, as browsers encode it."""
    try:
        mapped = idna.uts46_remap(host, std3_rules=False, transitional=False)
    except (idna.IDNAError, UnicodeError, ValueError) as exc:
        raise BadHost(f"host {host!r}: {exc}") from None
    if mapped.isascii() or _FORBIDDEN.search(mapped):
        return mapped
    try:
        return idna.encode(mapped).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        return ".".join(
            label if label.isascii() else "xn--" + label.encode("punycode").decode() for label in mapped.split(".")
        )


def _ends_in_number(host: str) -> bool:
    last = host.rpartition(".")[2]
    return last.isascii() and (last.isdigit() or _ipv4_number(last) is not None)


def _ipv4(host: str) -> str:
    """A host that ends in a number is an IPv4 address in one of its forms ("0x7f.1", "2130706433",
    "0177.0.0.1"), or refused."""
    numbers = [_ipv4_number(part) for part in host.split(".")]
    if len(numbers) > 4 or None in numbers:
        raise BadHost(f"host {host!r} ends in a number but is no IPv4 address")
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= 256 ** (5 - len(numbers)):
        raise BadHost(f"host {host!r} is an IPv4 address out of range")
    value = last + sum(n << (8 * (3 - i)) for i, n in enumerate(leading))
    return str(ipaddress.IPv4Address(value))


def _ipv4_number(part: str) -> int | None:
    """One part of an IPv4 address: decimal, octal with a leading 0, hex with 0x; None otherwise."""
    if not part:
        return None
    if part[:2] in ("0x", "0X"):
        digits, radix = part[2:], 16
    elif len(part) > 1 and part[0] == "0":
        digits, radix = part[1:], 8
    else:
        digits, radix = part, 10
    if not digits:
        return 0
    return int(digits, radix) if all(c in _DIGITS[radix] for c in digits) else None


def cookie_domain_allowed(domain: str, host: str) -> bool:
    """Whether a cookie set by `host` with a Domain attribute of `domain` is kept, by browsers'
    rules (RFC 6265 5.3, 5.1.3): an IP address sets cookies for itself only (not "Domain=.0.0.1"),
    and no cookie is set for a public suffix ("Domain=.github.io", ".co.uk"; a host that is one
    itself, "localhost", may name itself)."""
    domain, host = domain.lstrip(".").lower(), host.lower().rstrip(".")
    if domain == host:
        return True
    if _is_ip(host) or _is_ip(domain) or _ends_in_number(domain):
        return False
    return not _PUBLIC_SUFFIXES.is_public(domain)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def registrable_domain(host: str) -> str | None:
    """The domain a host was registered under, by the public suffix list: "example.com" for
    "a.b.example.com", "a.co.uk" for "b.a.co.uk", "foo.github.io" for itself. None for an IP
    address, a public suffix itself ("com", "github.io") or a name under no known suffix ("localhost")."""
    if _is_ip(host) or _ends_in_number(host):
        return None
    return _PUBLIC_SUFFIXES.privatesuffix(host.lower().rstrip("."))
