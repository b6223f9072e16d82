"""Login throttling: a user name that failed CRAWLHUB_LOGIN_ATTEMPTS times is refused, right password
or not, in the admin and the API's session login alike; other names are not."""

import pytest
from django.core.cache import cache

pytestmark = pytest.mark.django_db
PASSWORD = "correct-horse-battery-staple"


@pytest.fixture(autouse=True)
def users(django_user_model, settings):
    settings.CRAWLHUB_LOGIN_ATTEMPTS = 3
    cache.clear()
    for name in ("target", "bystander"):
        django_user_model.objects.create_user(name, password=PASSWORD, is_staff=True)
    yield
    cache.clear()


def log_in(client, username: str, password: str) -> bool:
    client.post("/admin/login/", {"username": username, "password": password})
    return "_auth_user_id" in client.session


def test_a_name_that_failed_too_often_is_refused_even_with_the_right_password(client):
    assert not any(log_in(client, "target", f"guess-{n}") for n in range(3))
    assert not log_in(client, "target", PASSWORD)
    assert not log_in(client, "TARGET", PASSWORD), "the name's case changes nothing"
    assert log_in(client, "bystander", PASSWORD), "other names log in"


def test_a_name_under_its_budget_logs_in(client):
    assert not any(log_in(client, "target", f"guess-{n}") for n in range(2))
    assert log_in(client, "target", PASSWORD)
