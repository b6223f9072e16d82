"""Nothing is readable without credentials: every URL the project routes (admin, dashboard, REST
API, schema and docs, metrics, changes feed) answers 401/403 or redirects to the login page."""

import pytest
from django.urls import Resolver404, get_resolver, resolve

PUBLIC = {"admin:login", "admin:logout"}  # the way in and out
SAMPLE = {"format": "json"}  # every other path parameter gets "1"


def routes(resolver=None, prefix: str = "", namespace: str = ""):
    """(name, path) for every named URL, with sample values in its parameters (namespaces included)."""
    resolver = resolver or get_resolver()
    for name in resolver.reverse_dict:
        if not isinstance(name, str):
            continue
        for pattern, params in (p for possibility in resolver.reverse_dict.getlist(name) for p in possibility[0]):
            yield f"{namespace}{name}", "/" + prefix + pattern % {p: SAMPLE.get(p, "1") for p in params}
    for ns, (ns_prefix, sub) in resolver.namespace_dict.items():
        yield from routes(sub, prefix + ns_prefix, f"{namespace}{ns}:")


def resolves(path: str) -> bool:
    try:
        resolve(path)
    except Resolver404:  # a sample that the route's own regex refuses (DRF's format suffixes)
        return False
    return True


ALL = sorted(r for r in set(routes()) if resolves(r[1]))


def test_it_finds_the_routes_of_every_surface():
    names = {name for name, _ in ALL}
    for expected in (
        "admin:index",
        "admin-dashboard",
        "admin-dashboard-data",
        "api-changes",
        "admin:crawl_page_changelist",
    ):
        assert expected in names
    paths = {path for _, path in ALL}
    assert any(p.startswith("/api/projects/") for p in paths)
    assert any(p.startswith("/metrics") for p in paths)
    assert len(ALL) > 100


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "path"), [r for r in ALL if r[0] not in PUBLIC], ids=lambda v: str(v))
@pytest.mark.parametrize("method", ["get", "post"])
def test_it_refuses_anonymous_requests(client, name, path, method):
    response = getattr(client, method)(path)
    if response.status_code in (301, 302):
        assert response["Location"].startswith("/admin/login/"), (name, path, response["Location"])
    else:
        assert response.status_code in (401, 403, 405), (name, path, response.status_code)
        if response.status_code == 405:  # the method is not routed: the other one must be refused
            other = client.get(path) if method == "post" else client.post(path)
            assert other.status_code in (301, 302, 401, 403), (name, path, other.status_code)
