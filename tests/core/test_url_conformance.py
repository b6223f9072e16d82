"""Link resolution and canonical URLs held to the web-platform-tests URL data
(url/resources/urltestdata.json: its http(s) cases with a base) and to w3lib's canonicalize_url
tests. Pure: no database, no network.

WPT: each case is an href, the base it is resolved against and the URL a browser makes of it (None
when the browser refuses it, or makes a URL that is not http(s), which crawlhub never crawls).
crawlhub resolves links with core.hrefs.absolute_http_url and fetches their canonical form,
so the check is that both give the same canonical URL: the same page is fetched.

w3lib: each case is a URL and w3lib's canonical form; crawlhub's canonicalize builds on it.

Where crawlhub differs on purpose, DIFFERENT pins its answer and says why (docs/crawling.md).
"""

from urllib.parse import urlsplit

import pytest

from core.canonical import InvalidURL, canonicalize
from core.hrefs import absolute_http_url

BASE = "http://example.org/foo/bar"
BLANK = "about:blank"  # WPT's base for absolute URLs, which do not read it

# (href, base, the browser's URL or None)
WPT = [
    ("http://example\t.\norg", BASE, "http://example.org/"),
    ("http://user:pass@foo:21/bar;par?b#c", BASE, "http://user:pass@foo:21/bar;par?b#c"),
    ("https://test:@test", BLANK, "https://test@test/"),
    ("https://:@test", BLANK, "https://test/"),
    ("http:foo.com", BASE, "http://example.org/foo/foo.com"),
    ("\t   :foo.com   \n", BASE, "http://example.org/foo/:foo.com"),
    (" foo.com  ", BASE, "http://example.org/foo/foo.com"),
    ("a:\t foo.com", BASE, None),  # a: foo.com, not http(s)
    ("http://f:21/ b ? d # e ", BASE, "http://f:21/%20b%20?%20d%20#%20e"),
    ("lolscheme:x x#x x", BASE, None),
    ("http://f:/c", BASE, "http://f/c"),
    ("http://f:0/c", BASE, "http://f:0/c"),
    ("http://f:00000000000000/c", BASE, "http://f:0/c"),
    ("http://f:00000000000000000000080/c", BASE, "http://f/c"),
    ("http://f:b/c", BASE, None),
    ("http://f: /c", BASE, None),
    ("http://f:\n/c", BASE, "http://f/c"),
    ("http://f:fifty-two/c", BASE, None),
    ("http://f:999999/c", BASE, None),
    ("http://f: 21 / b ? d # e ", BASE, None),
    ("", BASE, "http://example.org/foo/bar"),
    ("  \t", BASE, "http://example.org/foo/bar"),
    (":foo.com/", BASE, "http://example.org/foo/:foo.com/"),
    (":foo.com\\", BASE, "http://example.org/foo/:foo.com/"),
    (":", BASE, "http://example.org/foo/:"),
    (":a", BASE, "http://example.org/foo/:a"),
    (":/", BASE, "http://example.org/foo/:/"),
    (":\\", BASE, "http://example.org/foo/:/"),
    (":#", BASE, "http://example.org/foo/:#"),
    ("#", BASE, "http://example.org/foo/bar#"),
    ("#/", BASE, "http://example.org/foo/bar#/"),
    ("#\\", BASE, "http://example.org/foo/bar#\\"),
    ("#;?", BASE, "http://example.org/foo/bar#;?"),
    ("?", BASE, "http://example.org/foo/bar?"),
    ("/", BASE, "http://example.org/"),
    (":23", BASE, "http://example.org/foo/:23"),
    ("/:23", BASE, "http://example.org/:23"),
    ("\\x", BASE, "http://example.org/x"),
    ("\\\\x\\hello", BASE, "http://x/hello"),
    ("::", BASE, "http://example.org/foo/::"),
    ("::23", BASE, "http://example.org/foo/::23"),
    ("foo://", BASE, None),
    ("http://a:b@c:29/d", BASE, "http://a:b@c:29/d"),
    ("http::@c:29", BASE, "http://example.org/foo/:@c:29"),
    ("http://&a:foo(b]c@d:2/", BASE, "http://&a:foo(b%5Dc@d:2/"),
    ("http://::@c@d:2", BASE, "http://:%3A%40c@d:2/"),
    ("http://foo.com:b@d/", BASE, "http://foo.com:b@d/"),
    ("http://foo.com/\\@", BASE, "http://foo.com//@"),
    ("http:\\\\foo.com\\", BASE, "http://foo.com/"),
    ("http:\\\\a\\b:c\\d@foo.com\\", BASE, "http://a/b:c/d@foo.com/"),
    ("foo:/", BASE, None),
    ("foo:/bar.com/", BASE, None),
    ("foo://///////", BASE, None),
    ("foo:////://///", BASE, None),
    ("c:/foo", BASE, None),
    ("//foo/bar", BASE, "http://foo/bar"),
    ("http://foo/path;a??e#f#g", BASE, "http://foo/path;a??e#f#g"),
    ("http://foo/abcd?efgh?ijkl", BASE, "http://foo/abcd?efgh?ijkl"),
    ("http://foo/abcd#foo?bar", BASE, "http://foo/abcd#foo?bar"),
    ("[61:24:74]:98", BASE, "http://example.org/foo/[61:24:74]:98"),
    ("http:[61:27]/:foo", BASE, "http://example.org/foo/[61:27]/:foo"),
    ("http://[1::2]:3:4", BASE, None),
    ("http://2001::1", BASE, None),
    ("http://2001::1]", BASE, None),
    ("http://2001::1]:80", BASE, None),
    ("http://[2001::1]", BASE, "http://[2001::1]/"),
    ("http://[::127.0.0.1]", BASE, "http://[::7f00:1]/"),
    ("http://[0:0:0:0:0:0:13.1.68.3]", BASE, "http://[::d01:4403]/"),
    ("http://[2001::1]:80", BASE, "http://[2001::1]/"),
    ("http:/example.com/", BASE, "http://example.org/example.com/"),
    ("ftp:/example.com/", BASE, None),
    ("https:/example.com/", BASE, "https://example.com/"),
    ("madeupscheme:/example.com/", BASE, None),
    ("file:/example.com/", BASE, None),
    ("ws:/example.com/", BASE, None),
    ("data:/example.com/", BASE, None),
    ("javascript:/example.com/", BASE, None),
    ("mailto:/example.com/", BASE, None),
    ("http:example.com/", BASE, "http://example.org/foo/example.com/"),
    ("ftp:example.com/", BASE, None),
    ("https:example.com/", BASE, "https://example.com/"),
    ("/a/b/c", BASE, "http://example.org/a/b/c"),
    ("/a/ /c", BASE, "http://example.org/a/%20/c"),
    ("/a%2fc", BASE, "http://example.org/a%2fc"),
    ("/a/%2f/c", BASE, "http://example.org/a/%2f/c"),
    ("#\u03b2", BASE, "http://example.org/foo/bar#%CE%B2"),
    ("data:text/html,test#test", BASE, None),
    ("tel:1234567890", BASE, None),
    ("ssh://example.com/foo/bar.git", "http://example.org/", None),
    # paths
    ("http://example.com/././foo", BLANK, "http://example.com/foo"),
    ("http://example.com/./.foo", BLANK, "http://example.com/.foo"),
    ("http://example.com/foo/.", BLANK, "http://example.com/foo/"),
    ("http://example.com/foo/./", BLANK, "http://example.com/foo/"),
    ("http://example.com/foo/bar/..", BLANK, "http://example.com/foo/"),
    ("http://example.com/foo/bar/../", BLANK, "http://example.com/foo/"),
    ("http://example.com/foo/..bar", BLANK, "http://example.com/foo/..bar"),
    ("http://example.com/foo/bar/../ton/../../a", BLANK, "http://example.com/a"),
    ("http://example.com/foo/../../..", BLANK, "http://example.com/"),
    ("http://example.com/foo/../../../ton", BLANK, "http://example.com/ton"),
    ("http://example.com/foo/%2e", BLANK, "http://example.com/foo/"),
    ("http://example.com/foo/%2e%2", BLANK, "http://example.com/foo/%2e%2"),
    ("http://example.com/foo/%2e./%2e%2e/.%2e/%2e.bar", BLANK, "http://example.com/%2e.bar"),
    ("http://example.com////../..", BLANK, "http://example.com//"),
    ("http://example.com/foo/bar//../..", BLANK, "http://example.com/foo/"),
    ("http://example.com/foo/bar//..", BLANK, "http://example.com/foo/bar/"),
    ("http://example.com/foo", BLANK, "http://example.com/foo"),
    ("http://example.com/%20foo", BLANK, "http://example.com/%20foo"),
    ("http://example.com/foo%", BLANK, "http://example.com/foo%"),
    ("http://example.com/foo%2", BLANK, "http://example.com/foo%2"),
    ("http://example.com/foo%2zbar", BLANK, "http://example.com/foo%2zbar"),
    ("http://example.com/foo%2\u00c2\u00a9zbar", BLANK, "http://example.com/foo%2%C3%82%C2%A9zbar"),
    ("http://example.com/foo%41%7a", BLANK, "http://example.com/foo%41%7a"),
    ("http://example.com/foo\t\u0091%91", BLANK, "http://example.com/foo%C2%91%91"),
    ("http://example.com/foo%00%51", BLANK, "http://example.com/foo%00%51"),
    ("http://example.com/(%28:%3A%29)", BLANK, "http://example.com/(%28:%3A%29)"),
    ("http://example.com/%3A%3a%3C%3c", BLANK, "http://example.com/%3A%3a%3C%3c"),
    ("http://example.com/foo\tbar", BLANK, "http://example.com/foobar"),
    ("http://example.com\\\\foo\\\\bar", BLANK, "http://example.com//foo//bar"),
    ("http://example.com/%7Ffp3>*()&%", BLANK, "http://example.com/%7Ffp3%3E*()&%"),
    ("http://example.com/@asdf%40", BLANK, "http://example.com/@asdf%40"),
    ("http://example.com/\u4f60\u597d\u4f60\u597d", BLANK, "http://example.com/%E4%BD%A0%E5%A5%BD%E4%BD%A0%E5%A5%BD"),
    ("http://example.com/\u2025/foo", BLANK, "http://example.com/%E2%80%A5/foo"),
    ("http://example.com/\ufeff/foo", BLANK, "http://example.com/%EF%BB%BF/foo"),
    ("http://example.com/\u202e/foo/\u202d/bar", BLANK, "http://example.com/%E2%80%AE/foo/%E2%80%AD/bar"),
    # hosts
    ("http://www.google.com/foo?bar=baz#", BLANK, "http://www.google.com/foo?bar=baz#"),
    ("http://www.google.com/foo?bar=baz# \u00bb", BLANK, "http://www.google.com/foo?bar=baz#%20%C2%BB"),
    ("http://[www.google.com]/", BLANK, None),
    ("http://www.google.com", BLANK, "http://www.google.com/"),
    ("http://192.0x00A80001", BLANK, "http://192.168.0.1/"),
    ("http://www/foo%2Ehtml", BLANK, "http://www/foo%2Ehtml"),
    ("http://www/foo/%2E/html", BLANK, "http://www/foo/html"),
    ("http://user:pass@/", BLANK, None),
    ("http://%25DOMAIN:foobar@foodomain.com/", BLANK, "http://%25DOMAIN:foobar@foodomain.com/"),
    ("http:\\\\www.google.com\\foo", BLANK, "http://www.google.com/foo"),
    ("http://foo:80/", BLANK, "http://foo/"),
    ("http://foo:81/", BLANK, "http://foo:81/"),
    ("httpa://foo:80/", BLANK, None),
    ("http://foo:-80/", BLANK, None),
    ("https://foo:443/", BLANK, "https://foo/"),
    ("https://foo:80/", BLANK, "https://foo:80/"),
    ("ftp://foo:21/", BLANK, None),
    ("ws://foo:80/", BLANK, None),
    ("http://example.com/foo/%2e%2", BLANK, "http://example.com/foo/%2e%2"),
    ("http://GOO\u200b\u2060\ufeffgoo.com", "http://other.com/", "http://googoo.com/"),
    ("http://GOO \u3000goo.com", "http://other.com/", None),
    ("\u0000\u001b\u0004\u0012 http://example.com/\u001f \u000d ", BLANK, "http://example.com/"),
    ("https://x/\u0000y", BLANK, "https://x/%00y"),
    ("https://x/?\u0000y", BLANK, "https://x/?%00y"),
    ("http://www.foo\u3002bar.com", "http://other.com/", "http://www.foo.bar.com/"),
    ("http://\ufdd0zyx.com", "http://other.com/", None),
    ("http://%ef%b7%90zyx.com", "http://other.com/", None),
    ("https://\ufffd", BLANK, None),
    ("https://%EF%BF%BD", BLANK, None),
    ("https://x/\ufffd?\ufffd#\ufffd", BLANK, "https://x/%EF%BF%BD?%EF%BF%BD#%EF%BF%BD"),
    ("http://\uff27\uff4f.com", "http://other.com/", "http://go.com/"),
    ("http://%41.com", "http://other.com/", "http://a.com/"),
    ("http://%ef%bc%85%ef%bc%94%ef%bc%91.com", "http://other.com/", None),
    ("http://%ef%bc%85%ef%bc%90%ef%bc%90.com", "http://other.com/", None),
    ("http://\u4f60\u597d\u4f60\u597d", "http://other.com/", "http://xn--6qqa088eba/"),
    ("https://fa\u00df.ExAmPlE/", BLANK, "https://xn--fa-hia.example/"),
    ("http://%zz%66%a.com", "http://other.com/", None),
    ("http://%25", "http://other.com/", None),
    ("http://hello%00", "http://other.com/", None),
    ("http://%30%78%63%30%2e%30%32%35%30.01", "http://other.com/", "http://192.168.0.1/"),
    ("http://%30%78%63%30%2e%30%32%35%30.01%2e", "http://other.com/", "http://192.168.0.1/"),
    ("http://192.168.0.257", "http://other.com/", None),
    ("http://%3g%78%63%30%2e%30%32%35%30%2E.01", "http://other.com/", None),
    ("http://192.168.0.1 hello", "http://other.com/", None),
    ("https://x x:12", BLANK, None),
    (
        "http://\uff10\uff38\uff43\uff10\uff0e\uff10\uff12\uff15\uff10\uff0e\uff10\uff11",
        "http://other.com/",
        "http://192.168.0.1/",
    ),
    ("http://./", BLANK, "http://./"),
    ("http://../", BLANK, "http://../"),
    ("http://[www.google.com]/", BLANK, None),
    ("http://host/?'", BLANK, "http://host/?%27"),
    ("http://[1:0::]", "http://example.net/", "http://[1::]/"),
    ("http://[0:1:2:3:4:5:6:7:8]", "http://example.net/", None),
    ("https://[0::0::0]", BLANK, None),
    ("https://[0:.0]", BLANK, None),
    ("https://[0:0:]", BLANK, None),
    ("https://[0:1:2:3:4:5:6:7.0.0.0.1]", BLANK, None),
    ("https://[0:1.00.0.0.0]", BLANK, None),
    ("https://[0:1.290.0.0.0]", BLANK, None),
    ("https://[0:1.23.23]", BLANK, None),
    # userinfo and the base's
    ("/some/path", "http://user@example.org/smth1/smth2", "http://user@example.org/some/path"),
    ("", "http://user:pass@example.org:21/smth", "http://user:pass@example.org:21/smth"),
    ("/some/path", "http://user:pass@example.org:21/smth", "http://user:pass@example.org:21/some/path"),
    ("http://a:@www.example.com", BLANK, "http://a@www.example.com/"),
    ("http://www.@pple.com", BLANK, "http://www.@pple.com/"),
    ("http://:@www.example.com", BLANK, "http://www.example.com/"),
    ("http://user@www.example.com", BLANK, "http://user@www.example.com/"),
    ("http://@www.example.com", BLANK, "http://www.example.com/"),
    ("http://a:b@www.example.com", BLANK, "http://a:b@www.example.com/"),
    ("http://@pple.com", BLANK, "http://pple.com/"),
    ("http://:b@www.example.com", BLANK, "http://:b@www.example.com/"),
    ("http://user@/www.example.com", BLANK, None),
    ("http://@/www.example.com", BLANK, None),
    ("http://a:b@/www.example.com", BLANK, None),
    ("http://@:www.example.com", BLANK, None),
    # queries and fragments
    ("http://example.org/test?\u0022", BLANK, "http://example.org/test?%22"),
    ("http://example.org/test?\u0023", BLANK, "http://example.org/test?#"),
    ("http://example.org/test?\u003c", BLANK, "http://example.org/test?%3C"),
    ("http://example.org/test?\u003e", BLANK, "http://example.org/test?%3E"),
    ("http://example.org/test?\u2323", BLANK, "http://example.org/test?%E2%8C%A3"),
    ("http://example.org/test?%23%23", BLANK, "http://example.org/test?%23%23"),
    ("http://example.org/test?%GH", BLANK, "http://example.org/test?%GH"),
    ("http://example.org/test?a#%EF", BLANK, "http://example.org/test?a#%EF"),
    ("http://example.org/test?a#%GH", BLANK, "http://example.org/test?a#%GH"),
    ("http://example.org/test?a#b\u0000c", BLANK, "http://example.org/test?a#b%00c"),
    ("?x", "http://example.org/foo/bar?a#b", "http://example.org/foo/bar?x"),
    ("#x", "http://example.org/foo/bar?a#b", "http://example.org/foo/bar?a#x"),
    ("i", "http://example.org/foo/bar", "http://example.org/foo/i"),
    ("../i", "http://example.org/foo/bar", "http://example.org/i"),
    ("../../../i", "http://example.org/foo/bar", "http://example.org/i"),
    ("./i", "http://example.org/foo/", "http://example.org/foo/i"),
    ("/i", "http://example.org/foo/bar", "http://example.org/i"),
    ("//i", "http://example.org/foo/bar", "http://i/"),
    ("///i", "http://example.org/foo/bar", "http://i/"),
    ("http://i", "https://example.org/foo/bar", "http://i/"),
    ("//i", "https://example.org/foo/bar", "https://i/"),
]

# (href, base) -> (crawlhub's canonical URL or None, why)
_SELF = "a link to the page it is on (empty, or a fragment alone) names no new page, so none is kept"
WPT_DIFFERENT = {
    ("", BASE): (None, _SELF),
    ("  \t", BASE): (None, _SELF),
    ("#", BASE): (None, _SELF),
    ("#/", BASE): (None, _SELF),
    ("#\\", BASE): (None, _SELF),
    ("#;?", BASE): (None, _SELF),
    ("#\u03b2", BASE): (None, _SELF),
    ("", "http://user:pass@example.org:21/smth"): (None, _SELF),
    ("#x", "http://example.org/foo/bar?a#b"): (None, _SELF),
    ("http://f:21/ b ? d # e ", BASE): (
        "http://f:21/%20b%20?+d=",
        "whitespace around a link is stripped once its fragment is cut (as w3lib strips it), so the "
        "query's last space goes too",
    ),
    ("http://&a:foo(b]c@d:2/", BASE): (
        None,
        "urlsplit refuses a ']' outside an IPv6 literal, even in the user info; such links are dropped",
    ),
}

# (url, w3lib's canonical form)
W3LIB = [
    ("http://www.example.com/", "http://www.example.com/"),
    ("http://www.example.com", "http://www.example.com/"),
    ("http://www.example.com/do?a=1&b=2&c=3", "http://www.example.com/do?a=1&b=2&c=3"),
    ("http://www.example.com/do?c=1&b=2&a=3", "http://www.example.com/do?a=3&b=2&c=1"),
    ("http://www.example.com/do?&a=1", "http://www.example.com/do?a=1"),
    ("http://www.example.com:8888/do?a=1&b=2&c=3", "http://www.example.com:8888/do?a=1&b=2&c=3"),
    ("http://www.example.com/do?c=3&b=5&b=2&a=50", "http://www.example.com/do?a=50&b=2&b=5&c=3"),
    ("http://www.example.com/do?q=a space&a=1", "http://www.example.com/do?a=1&q=a+space"),
    ("http://www.example.com/do?q=a+space&a=1", "http://www.example.com/do?a=1&q=a+space"),
    ("http://www.example.com/do?q=a%20space&a=1", "http://www.example.com/do?a=1&q=a+space"),
    ("http://www.example.com/r\u00e9sum\u00e9", "http://www.example.com/r%C3%A9sum%C3%A9"),
    (
        "http://www.example.com/r\u00e9sum\u00e9?q=r\u00e9sum\u00e9",
        "http://www.example.com/r%C3%A9sum%C3%A9?q=r%C3%A9sum%C3%A9",
    ),
    ("http://www.example.com/r%c3%a9sum%c3%a9", "http://www.example.com/r%C3%A9sum%C3%A9"),
    ("http://www.example.com/a%a3do", "http://www.example.com/a%A3do"),
    ("http://www.example.com/do?k=b%a3", "http://www.example.com/do?k=b%A3"),
    ("http://www.example.com/do?k=r%c3%a9sum%c3%a9", "http://www.example.com/do?k=r%C3%A9sum%C3%A9"),
    ("http://www.example.com/a do?a=1", "http://www.example.com/a%20do?a=1"),
    ("http://www.example.com/a %20do?a=1", "http://www.example.com/a%20%20do?a=1"),
    ("http://www.example.com/a do\u00a3.html?a=1", "http://www.example.com/a%20do%C2%A3.html?a=1"),
    ("http://www.example.com/do?price=\u00a3500&a=5&z=3", "http://www.example.com/do?a=5&price=%C2%A3500&z=3"),
    ("http://www.example.com/do?price(\u00a3)=500&a=1", "http://www.example.com/do?a=1&price%28%C2%A3%29=500"),
    ("http://user:pass@www.example.com:81/do?now=1", "http://user:pass@www.example.com:81/do?now=1"),
    ("http://user:pass@www.example.com/do?a=1#frag", "http://user:pass@www.example.com/do?a=1"),
    (
        "http://www.simplybedrooms.com/White-Bedroom-Furniture/Bedroom-Mirror:-Josephine-Cheval-Mirror.html",
        "http://www.simplybedrooms.com/White-Bedroom-Furniture/Bedroom-Mirror:-Josephine-Cheval-Mirror.html",
    ),
    ("http://www.example.com/caf%E9-curriculum.html", "http://www.example.com/caf%E9-curriculum.html"),
    ("http://www.EXAMPLE.com/", "http://www.example.com/"),
    ("sftp://UsEr:PaSsWoRd@www.EXAMPLE.com/", "sftp://UsEr:PaSsWoRd@www.example.com/"),
    ("http://www.b\u00fccher.de?q=b\u00fccher", "http://www.xn--bcher-kva.de/?q=b%C3%BCcher"),
    (
        "http://\u306f\u3058\u3081\u3088\u3046.\u307f\u3093\u306a/?query=\u30b5&maxResults=5",
        "http://xn--p8j9a0d9c9a.xn--q9jyb4c/?maxResults=5&query=%E3%82%B5",
    ),
    ("http://foo.com/AC%2FDC+rocks%3f/?yeah=1", "http://foo.com/AC%2FDC+rocks%3F/?yeah=1"),
    ("http://foo.com/AC%2FDC/", "http://foo.com/AC%2FDC/"),
    (
        "http://.example.com/r\u00e9sum\u00e9?q=r\u00e9sum\u00e9",
        "http://.example.com/r%C3%A9sum%C3%A9?q=r%C3%A9sum%C3%A9",
    ),
    (
        "http://www." + "example" * 11 + ".com/r\u00e9sum\u00e9?q=r\u00e9sum\u00e9",
        "http://www." + "example" * 11 + ".com/r%C3%A9sum%C3%A9?q=r%C3%A9sum%C3%A9",
    ),
    ("http://www.example.com/path/to/%23/foo/bar", "http://www.example.com/path/to/%23/foo/bar"),
    ("http://www.example.com/path/to/%23/foo/bar#frag", "http://www.example.com/path/to/%23/foo/bar"),
    (
        "http://www.example.com/path/to/%23/foo/bar?url=http%3A%2F%2Fwww.example.com%2Fpath%2Fto%2F%23%2Fbar%2Ffoo",
        "http://www.example.com/path/to/%23/foo/bar?url=http%3A%2F%2Fwww.example.com%2Fpath%2Fto%2F%23%2Fbar%2Ffoo",
    ),
    (
        "http://www.example.com/path/to/%23/foo/bar?url=http%3A%2F%2Fwww.example.com%2F2a%2F%23%2Fbar%2Ffoo#frag",
        "http://www.example.com/path/to/%23/foo/bar?url=http%3A%2F%2Fwww.example.com%2F2a%2F%23%2Fbar%2Ffoo",
    ),
    ("  https://example.com", "https://example.com/"),
    ("https://example.com  ", "https://example.com/"),
    ("  https://example.com  ", "https://example.com/"),
    ("http://www.example.com/do?", "http://www.example.com/do"),
    ("http://www.example.com/do?a=1&b=&c=", "http://www.example.com/do?a=1&b=&c="),
    ("http://www.example.com/do?a=1&b&c", "http://www.example.com/do?a=1&b=&c="),
    ("http://www.example.com/do?1750,4", "http://www.example.com/do?1750%2C4="),
    ("http://www.example.com/a/./b/../c", "http://www.example.com/a/c"),
    ("http://www.example.com:80/", "http://www.example.com:80/"),
    ("https://www.example.com:443/", "https://www.example.com:443/"),
    ("http://www.example.com./", "http://www.example.com./"),
    ("http://www.example.com/?utm_source=x&id=1", "http://www.example.com/?id=1&utm_source=x"),
    ("http://www.example.com/?PHPSESSID=abc&id=1", "http://www.example.com/?PHPSESSID=abc&id=1"),
    ("http://www.example.com/%7Euser", "http://www.example.com/~user"),
    ("http://www.example.com/do?q=%7E", "http://www.example.com/do?q=~"),
    ("http://www.example.com/do?q=caf%E9&r=%e8", "http://www.example.com/do?q=caf%E9&r=%E8"),
]

# url -> (crawlhub's canonical URL or None, why)
_CREDENTIALS = "user info is dropped: credentials found in a link are not sent, and do not make another page"
W3LIB_DIFFERENT = {
    "http://user:pass@www.example.com:81/do?now=1": ("http://www.example.com:81/do?now=1", _CREDENTIALS),
    "http://user:pass@www.example.com/do?a=1#frag": ("http://www.example.com/do?a=1", _CREDENTIALS),
    "sftp://UsEr:PaSsWoRd@www.EXAMPLE.com/": (None, "only http and https are crawled (blocked_scheme)"),
    "http://www.example.com:80/": ("http://www.example.com/", "the scheme's default port is dropped: one page"),
    "https://www.example.com:443/": ("https://www.example.com/", "the scheme's default port is dropped: one page"),
    "http://www.example.com./": ("http://www.example.com/", "a fully qualified host's final dot is dropped"),
    "http://www.example.com/?utm_source=x&id=1": ("http://www.example.com/?id=1", "tracking parameters are dropped"),
    "http://www.example.com/?PHPSESSID=abc&id=1": ("http://www.example.com/?id=1", "session parameters are dropped"),
}


def crawled(base: str, href: str) -> str | None:
    """The canonical URL crawlhub fetches for this link, or None when it fetches nothing."""
    url = absolute_http_url(base, href)
    return canonical_or_none(url) if url else None


def canonical_or_none(url: str | None) -> str | None:
    if url is None or urlsplit(url).scheme not in ("http", "https"):
        return None
    try:
        return canonicalize(url)
    except InvalidURL:
        return None


@pytest.mark.parametrize(("href", "base", "browser"), WPT)
def test_a_link_resolves_to_the_page_a_browser_opens_or_as_pinned(href, base, browser):
    expected, why = WPT_DIFFERENT.get((href, base), (canonical_or_none(browser), ""))
    assert crawled(base, href) == expected, why or f"the browser's {browser!r}"


@pytest.mark.parametrize(("url", "w3lib"), W3LIB)
def test_a_url_has_w3libs_canonical_form_or_as_pinned(url, w3lib):
    expected, why = W3LIB_DIFFERENT.get(url, (w3lib, ""))
    try:
        ours = canonicalize(url)
    except InvalidURL:
        ours = None
    assert ours == expected, why or "w3lib's canonical form"


def test_every_pinned_difference_is_a_case_and_differs():
    browsers = {(href, base): canonical_or_none(browser) for href, base, browser in WPT}
    for key, (ours, _) in WPT_DIFFERENT.items():
        assert ours != browsers[key]
    w3lib = dict(W3LIB)
    for url, (ours, _) in W3LIB_DIFFERENT.items():
        assert ours != w3lib[url]
