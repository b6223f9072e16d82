"""A session per project: the cookies its own sites set (Set-Cookie) are kept in the database and
sent with its later requests, from any worker, by the cookie rules (domain, path, expiry), to its
own sites only; shown masked in the admin; forgotten on request."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone
from rest_framework.test import APIClient

from core.net.guard import allow_networks
from crawl.models import Page, Project, SessionCookie
from crawl.services.projects import seeds_add
from fetch.cookies import session_load, session_save
from fetch.services import pages_fetch
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.django_db
HTML = {"Content-Type": "text/html; charset=utf-8"}
OWN, ELSEWHERE = "http://shop.test", "http://tracker.test"


def cookie_of(request) -> str:
    return next((v for k, v in request.headers.items() if k.lower() == "cookie"), "")


@pytest.fixture
def servers():
    allow_networks(["127.0.0.2/32", "127.0.0.3/32"])
    try:
        own_site = Site(default=(200, HTML, b"<html><body>ok</body></html>"))
        own_site.files["/login"] = (200, {**HTML, "Set-Cookie": "sid=s3cret-session; Path=/; HttpOnly"}, b"in")
        other_site = Site(default=(200, {**HTML, "Set-Cookie": "track=other-site; Path=/"}, b"x"))
        with SiteServer(own_site, host="127.0.0.3") as own, SiteServer(other_site, host="127.0.0.2") as other:
            yield own, other
    finally:
        allow_networks(settings.CRAWL_ALLOWED_NETWORKS)


def fetch_queued(project: Project) -> None:
    pages_fetch(page_ids=list(Page.objects.filter(project=project, state="queued").values_list("id", flat=True)))


def test_a_cookie_a_site_sets_goes_with_the_projects_later_requests_to_that_site_only(servers):
    own, other = servers
    project = Project.objects.create(
        name="s", slug="s", allow_private=True, obey_robots=False, allowed_domains="127.0.0.3"
    )
    seeds_add(project=project, urls=[f"{own.url}/login", f"{other.url}/elsewhere"])
    fetch_queued(project)
    assert list(SessionCookie.objects.values_list("domain", "name", "value", "http_only")) == [
        ("127.0.0.3", "sid", "s3cret-session", True)
    ]
    seeds_add(project=project, urls=[f"{own.url}/account", f"{other.url}/later"])
    fetch_queued(project)  # a fresh round loads the session from the database, as another worker would
    sent = {r.path: cookie_of(r) for r in own.requests + other.requests}
    assert sent["/account"] == "sid=s3cret-session"
    assert sent["/later"] == "" and sent["/elsewhere"] == ""


def test_the_cookie_rules_decide_what_is_sent_and_an_expired_cookie_is_removed():
    project = Project.objects.create(name="rules", slug="rules", allowed_domains="shop.test")
    session = session_load(project)
    session.keep(
        f"{OWN}/members/login",
        [
            "member=1; Path=/members",
            "wide=1; Domain=shop.test; Path=/",
            "secure=1; Secure; Path=/",
            "old=1; Path=/",
            "year=1; Path=/; Max-Age=31536000",
        ],
    )
    session.keep(f"{ELSEWHERE}/", ["foreign=1; Path=/"])  # not one of the project's sites: never kept
    session_save(session)
    fresh = session_load(project)
    assert fresh.header_for(f"{OWN}/members/a") == {"member": "1", "wide": "1", "old": "1", "year": "1"}
    assert fresh.header_for(f"{OWN}/about") == {"wide": "1", "old": "1", "year": "1"}
    assert fresh.header_for("http://www.shop.test/") == {"wide": "1"}
    assert fresh.header_for("https://shop.test/")["secure"] == "1"
    assert fresh.header_for(f"{ELSEWHERE}/") == {}
    fresh.keep(f"{OWN}/logout", ["old=; Path=/; Max-Age=0"])
    session_save(fresh)
    assert set(SessionCookie.objects.values_list("name", flat=True)) == {"member", "wide", "secure", "year"}
    year = SessionCookie.objects.get(name="year").expires_at
    assert timezone.now() + timedelta(days=364) < year < timezone.now() + timedelta(days=366)
    SessionCookie.objects.filter(name="year").update(expires_at=timezone.now() - timedelta(seconds=1))
    assert "year" not in session_load(project).header_for(f"{OWN}/")


def test_a_hostile_sites_cookies_are_kept_as_far_as_they_fit_or_left_out():
    project = Project.objects.create(name="hostile", slug="hostile", allowed_domains="shop.test")
    session = session_load(project)
    long_name = "n" * 300
    session.keep(f"{OWN}/", [f"{long_name}=1", "forever=1; Max-Age=1000000000000000", "nul=a\x00b", "fine=1"])
    session_save(session)
    kept = dict(SessionCookie.objects.values_list("name", "expires_at"))
    assert set(kept) == {"forever", "fine"} and kept["forever"].year == 9999
    assert session_load(project).header_for(f"{OWN}/") == {"forever": "1", "fine": "1"}


def test_a_project_that_keeps_no_cookies_keeps_and_sends_none(servers):
    own, _ = servers
    project = Project.objects.create(name="n", slug="n", allow_private=True, obey_robots=False, keep_cookies=False)
    seeds_add(project=project, urls=[f"{own.url}/login"])
    fetch_queued(project)
    assert not SessionCookie.objects.exists()


def test_the_admin_shows_the_session_masked_and_forgets_it(admin_client):
    project = Project.objects.create(name="a", slug="a", allowed_domains="shop.test")
    session = session_load(project)
    session.keep(f"{OWN}/login", ["sid=s3cret-session; Path=/"])
    session_save(session)
    page = admin_client.get(f"/admin/crawl/project/{project.id}/change/").content.decode()
    assert "sid=***" in page and "s3cret-session" not in page
    admin_client.post(
        "/admin/crawl/project/", {"action": "forget_session", "_selected_action": [str(project.id)]}, follow=True
    )
    assert not SessionCookie.objects.exists()


@pytest.mark.parametrize(
    ("url", "set_cookie"),
    [
        ("http://x.github.io/", "sid=1; Domain=.github.io; Path=/"),
        ("http://127.0.0.1/", "sid=1; Domain=.0.0.1; Path=/"),
        ("http://127.0.0.1/", "sid=1; Domain=0.1; Path=/"),
        ("http://shop.co.uk/", "sid=1; Domain=co.uk; Path=/"),
    ],
)
def test_a_cookie_for_a_public_suffix_or_part_of_an_ip_address_is_refused(url, set_cookie):
    """Issue 47, point 6: browsers refuse such a Domain (the public suffix list, bundled with the
    publicsuffixlist package); the site's own domain is kept."""
    project = Project.objects.create(name="psl", slug="psl", allowed_domains="github.io\nco.uk\n127.0.0.1")
    session = session_load(project)
    session.keep(url, [set_cookie, "own=1; Path=/"])
    session_save(session)
    assert list(SessionCookie.objects.values_list("name", flat=True)) == ["own"]
    session.keep("http://x.github.io/", ["wide=1; Domain=x.github.io; Path=/"])
    session_save(session)
    assert SessionCookie.objects.filter(name="wide", domain=".x.github.io").exists()


def test_a_login_session_is_a_secret_that_keeps_off_site_seeds_to_the_network_permission():
    """Issue 47, point 6: a project whose only secret is its session holds secrets."""
    from crawl.hosts.credentials import holds_secrets, secrets_refusal

    project = Project.objects.create(name="login", slug="login", allowed_domains="shop.test")
    assert not holds_secrets(project) and secrets_refusal(project, "http://elsewhere.test/") is None
    session = session_load(project)
    session.keep(f"{OWN}/login", ["sid=s3cret-session; Path=/"])
    session_save(session)
    assert holds_secrets(project)
    assert "a session" in secrets_refusal(project, "http://elsewhere.test/")
    assert secrets_refusal(project, f"{OWN}/account") is None


def test_a_sites_cookies_are_capped_in_size_and_count_as_a_browser_caps_them():
    """4096 bytes a cookie (name and value), 50 a domain, 300 a project; past the counts the
    cookies learnt last are kept, so a site that sets many more still keeps its login cookie."""
    project = Project.objects.create(name="greedy", slug="greedy", allowed_domains="shop.test")
    session = session_load(project)
    session.keep(f"{OWN}/", ["big=" + "x" * 4094, "fits=" + "x" * 4092])
    session.keep(f"{OWN}/", [f"c{i}=1" for i in range(120)])
    session_save(session)
    session.keep(f"{OWN}/", ["sid=logged-in"])
    session_save(session)
    names = set(SessionCookie.objects.filter(project=project).values_list("name", flat=True))
    assert "big" not in names, "over 4096 bytes: not kept"
    assert len(names) == 50 and "sid" in names, "50 a domain, the latest kept"
    assert len(session_load(project).header_for(f"{OWN}/")) == 50
    for i in range(8):  # 8 domains x 50 > 300 a project
        session.keep(f"http://d{i}.shop.test/", [f"n{j}=1" for j in range(50)])
    session_save(session)
    assert SessionCookie.objects.filter(project=project).count() <= 300


def test_a_projects_own_cookies_are_capped_as_the_sites_are(django_user_model):
    Project.objects.create(name="own", slug="own")
    api = APIClient()
    api.force_authenticate(django_user_model.objects.create_superuser("root", password="not-used"))
    for cookies in ({f"c{i}": "1" for i in range(51)}, {"big": "x" * 4094}):
        with pytest.raises(ValidationError):
            Project(name="x", slug="x", cookies=cookies).full_clean()  # the admin's form checks this
        refused = api.patch("/api/projects/own/", {"cookies": cookies}, format="json")
        assert refused.status_code == 400 and "cookies" in refused.json(), refused.content
    assert api.patch("/api/projects/own/", {"cookies": {"big": "x" * 4093}}, format="json").status_code == 200
