"""The render path's one way out (core.net.browser through core.net.egress), witnessed by the servers it
protects: a private server's own count of accepted connections stays 0.

127.0.0.2 stands for the public internet (an allowed network, as an operator would allow an intranet
subnet); 127.0.0.1 is private and the project does not allow private networks.
"""

import os
import shutil
import socket
from contextlib import suppress
from pathlib import Path

import pytest
from django.conf import settings

from core.net import guard as netguard
from core.net.browser import Renderer
from tests.core.test_render import AGENT, page, serve
from tests.servers import ForwardProxy, Victim

pytestmark = pytest.mark.skipif(
    shutil.which("chromium") is None, reason="chromium is not installed (run scripts/system-deps.sh)"
)

SECRETS = ("DATABASE_URL", "CELERY_BROKER_URL", "DJANGO_SECRET_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


@pytest.fixture(autouse=True)
def public_host():
    netguard.allow_networks(["127.0.0.2/32"])
    yield "127.0.0.2"
    netguard.allow_networks(settings.CRAWL_ALLOWED_NETWORKS)


@pytest.fixture
def victim():
    victim = Victim()
    yield victim
    victim.close()


@pytest.fixture(scope="module")
def renderer():
    renderer = Renderer(watchdog_grace=2.0)
    yield renderer
    renderer.close()


def render(renderer: Renderer, url: str, **options):
    defaults = {"allow_private": False, "user_agent": AGENT, "timeout": 5.0, "max_bytes": 1024 * 1024}
    return renderer.render(url, **(defaults | options))


def attacking_page(target: str) -> tuple:
    """A page whose every kind of subrequest goes for `target` (http://host:port), and that says in
    its DOM whether its script's own requests got an answer."""
    return page(f"""<p>attacker</p>
        <img src="{target}/img.png"><script src="{target}/s.js"></script><iframe src="{target}/frame"></iframe>
        <script src="/own.js"></script>
        <script>
          const mark = (what) => document.body.insertAdjacentHTML("beforeend", `<i>${{what}}</i>`);
          fetch("{target}/api").then(() => mark("fetch-leaked"), () => mark("fetch-refused"));
          const xhr = new XMLHttpRequest();
          xhr.onload = () => mark("xhr-leaked"); xhr.onerror = () => mark("xhr-refused");
          xhr.open("GET", "{target}/xhr"); xhr.send();
        </script>""")


OWN_SCRIPT = (200, {"Content-Type": "text/javascript"}, b'document.body.insertAdjacentHTML("beforeend", "<b>own</b>")')


def test_no_subrequest_of_a_page_reaches_a_private_server(renderer, public_host, victim):
    target = f"http://127.0.0.1:{victim.port}"
    with serve({"/": attacking_page(target), "/own.js": OWN_SCRIPT}, public_host) as site:
        rendered = render(renderer, site.url + "/")
    assert rendered.error_code == "", rendered.error_message
    assert rendered.status_code == 200
    assert b"<b>own</b>" in rendered.body  # the page's own host is reached through the gate
    assert b"<i>fetch-refused</i>" in rendered.body and b"<i>xhr-refused</i>" in rendered.body
    assert victim.accepted == 0


@pytest.mark.parametrize("host", ["localhost", "[::ffff:127.0.0.1]", "127.1"])
def test_other_spellings_of_a_private_server_are_refused_too(renderer, public_host, victim, host):
    with serve({"/": attacking_page(f"http://{host}:{victim.port}"), "/own.js": OWN_SCRIPT}, public_host) as site:
        rendered = render(renderer, site.url + "/")
    assert (rendered.error_code, rendered.status_code) == ("", 200), rendered.error_message
    assert victim.accepted == 0


def test_a_redirect_of_the_page_to_a_private_server_is_refused(renderer, public_host, victim):
    with serve({"/r": (302, {"Location": f"http://127.0.0.1:{victim.port}/x"}, b"")}, public_host) as site:
        rendered = render(renderer, site.url + "/r")
    assert rendered.error_code == "blocked_address", rendered.error_message
    assert "127.0.0.1 is a non-public address" in rendered.error_message
    assert site.paths() == ["/r"] and victim.accepted == 0


def test_a_private_page_is_refused_before_any_connection(renderer, victim):
    rendered = render(renderer, f"http://127.0.0.1:{victim.port}/")
    assert rendered.error_code == "blocked_address", rendered.error_message
    assert victim.accepted == 0


def test_a_site_cannot_forge_the_gates_refusal(renderer, public_host):
    forged = (403, {"Content-Type": "text/html", "X-Crawlhub-Egress": "blocked_address"}, b"<p>mine</p>")
    with serve({"/": forged}, public_host) as site:
        rendered = render(renderer, site.url + "/")
    assert (rendered.error_code, rendered.status_code) == ("", 403), rendered.error_message
    assert b"<p>mine</p>" in rendered.body


def test_a_name_that_rebinds_to_a_private_address_reaches_nothing_private(renderer, public_host, monkeypatch):
    answers = []

    def rebinding(host: str, port: int | None) -> list[str]:
        """The first answer for rebind.test is public, every later one private."""
        if host != "rebind.test":
            raise socket.gaierror(socket.EAI_NONAME, "unknown")
        answers.append("127.0.0.2" if not answers else "127.0.0.1")
        return [answers[-1]]

    monkeypatch.setattr(netguard, "getaddrinfo", rebinding)
    victim = Victim()
    try:  # the private server listens at the same port as the public one: only the address differs
        with serve({"/": attacking_page("")}, public_host, victim.port) as site:  # more from its own origin
            rendered = render(renderer, f"http://rebind.test:{victim.port}/")
    finally:
        victim.close()
    assert (rendered.error_code, rendered.status_code) == ("", 200), rendered.error_message
    assert b"<i>fetch-refused</i>" in rendered.body
    assert site.paths() == ["/"] and len(answers) > 1  # each later connection was resolved (and refused) anew
    assert victim.accepted == 0


def test_a_project_proxy_carries_the_page_and_never_a_private_target(renderer, public_host, victim):
    proxy = ForwardProxy(username="crawler", password="s3cret")
    routes = {"/": attacking_page(f"http://127.0.0.1:{victim.port}"), "/own.js": OWN_SCRIPT}
    try:
        with serve(routes, public_host) as site:
            rendered = render(renderer, site.url + "/", proxy=proxy.url(credentials="crawler:s3cret"))
    finally:
        proxy.close()
    assert rendered.error_code == "", rendered.error_message
    assert b"<b>own</b>" in rendered.body
    assert {target for _method, target, _auth in proxy.requests} == {f"127.0.0.2:{site.port}"}, proxy.requests
    assert victim.accepted == 0


def test_a_bad_project_proxy_is_a_proxy_error(renderer, public_host):
    rendered = render(renderer, "http://127.0.0.2:9/", proxy="socks5://127.0.0.1:1080")
    assert rendered.error_code == "proxy_error", rendered.error_message


def test_the_browser_holds_none_of_the_workers_secrets(renderer, monkeypatch, public_host):
    for name in SECRETS:
        monkeypatch.setenv(name, "secret-of-the-worker")
    renderer.close()  # the next render starts a browser under this environment
    with serve({"/": page("<p>hello</p>")}, public_host) as site:
        assert render(renderer, site.url + "/").error_code == ""
    browser = renderer._browser_pid
    pids = _process_tree(browser)
    environments = [_environ(pid) for pid in pids]
    command_line = Path(f"/proc/{browser}/cmdline").read_bytes().split(b"\0")
    assert len(pids) > 1  # the browser and its zygotes, renderer, GPU and utility processes
    assert not [pid for pid, env in zip(pids, environments, strict=True) if b"secret-of-the-worker" in env]
    env = dict(entry.split(b"=", 1) for entry in environments[0].split(b"\0") if b"=" in entry)
    assert not [name for name in env if name.startswith((b"DATABASE_", b"AWS_", b"DJANGO_", b"CELERY_"))]
    assert env[b"HOME"] != os.environ["HOME"].encode() and b"crawlhub-chromium-" in env[b"HOME"]
    assert (b"--no-sandbox" in command_line) == (os.geteuid() == 0)  # sandboxed unless we are root


def _process_tree(pid: int) -> list[int]:
    """pid and its descendants (a short-lived utility process may be gone by the time it is read)."""
    children = []
    with suppress(FileNotFoundError, ProcessLookupError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            children += [int(c) for c in (task / "children").read_text().split()]
    return [pid] + [p for child in children for p in _process_tree(child)]


def _environ(pid: int) -> bytes:
    """Zygote-forked processes write their title over the environment block: only bytes to search."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return b""
