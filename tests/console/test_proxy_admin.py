"""The proxy pool's admin: each proxy's state, score and rest, its password masked everywhere; a
form sent back with the masked URL keeps the stored password; only network settings may change it."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from console.access.roles import roles_install
from console.models import ProjectAccess
from crawl.models import Project, ProjectProxy

pytestmark = pytest.mark.django_db
PASSWORD = "poolpw-s3cret"


@pytest.fixture
def proxy():
    project = Project.objects.create(name="shop", slug="shop")
    return ProjectProxy.objects.create(
        project=project,
        url=f"http://u:{PASSWORD}@p.test:3128",
        score=42,
        rested_until=timezone.now() + timedelta(hours=1),
    )


def test_it_lists_state_score_and_rest_with_the_password_masked(admin_client, proxy):
    listed = admin_client.get(reverse("admin:crawl_projectproxy_changelist")).content.decode()
    page = admin_client.get(reverse("admin:crawl_projectproxy_change", args=[proxy.id])).content.decode()
    assert "http://u:***@p.test:3128" in listed and "resting" in listed and ">42<" in listed
    assert PASSWORD not in listed + page and "u:***@p.test" in page


def test_a_form_sent_back_masked_keeps_the_password_and_the_action_ends_the_rest(admin_client, proxy):
    url = reverse("admin:crawl_projectproxy_change", args=[proxy.id])
    sent = admin_client.post(url, {"project": proxy.project_id, "url": "http://u:***@p.test:3128", "active": "on"})
    assert sent.status_code == 302
    changelist = reverse("admin:crawl_projectproxy_changelist")
    admin_client.post(changelist, {"action": "back_in_service", "_selected_action": [proxy.id]})
    proxy.refresh_from_db()
    assert proxy.url == f"http://u:{PASSWORD}@p.test:3128" and proxy.rested_until is None


def test_an_operator_sees_the_pool_but_may_not_change_it(client, django_user_model, proxy):
    roles_install()
    operator = django_user_model.objects.create_user("op", password="x", is_staff=True)
    operator.groups.add(Group.objects.get(name="operator"))
    ProjectAccess.objects.create(project=proxy.project, user=operator)
    client.force_login(operator)
    url = reverse("admin:crawl_projectproxy_change", args=[proxy.id])
    page = client.get(url).content.decode()
    client.post(url, {"project": proxy.project_id, "url": "http://evil.test:1", "active": "on"})
    proxy.refresh_from_db()
    assert "u:***@p.test" in page and PASSWORD not in page
    assert proxy.url.endswith("@p.test:3128"), "unchanged"
