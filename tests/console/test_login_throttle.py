"""Login throttling: a user name that failed CRAWLHUB_LOGIN_ATTEMPTS times is refused, right password
or not, in the admin and the API's session login alike, counted across processes; other names are not."""

import pytest
from django.core.cache import cache

from console.access.login_throttle import _key
from tests.conftest import run_manage

pytestmark = pytest.mark.django_db
PASSWORD = "correct-horse-battery-staple"
NAMES = ("target", "bystander")


def forget_failures() -> None:
    cache.delete_many([_key(name) for name in NAMES])  # not cache.clear(): in tests Redis is the broker's db


@pytest.fixture(autouse=True)
def users(django_user_model, settings):
    settings.CRAWLHUB_LOGIN_ATTEMPTS = 3
    forget_failures()
    for name in NAMES:
        django_user_model.objects.create_user(name, password=PASSWORD, is_staff=True)
    yield
    forget_failures()


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


@pytest.mark.parametrize("cache_kind", ["redis", "files under var/"])
def test_the_budget_holds_across_processes(worker_env, tmp_path, cache_kind):
    """Two web processes, as gunicorn runs them: their failures add up, for the third one too."""
    env = worker_env | {"CRAWLHUB_LOGIN_ATTEMPTS": "3"}
    if cache_kind != "redis":  # the embedded default: no Redis anywhere
        env = {k: v for k, v in env.items() if k != "CELERY_BROKER_URL"} | {"CRAWLHUB_VAR_DIR": str(tmp_path)}
    forget_failures()

    def logs_in(password: str) -> bool:
        code = (
            "from django.contrib.auth import authenticate;"
            f"print(authenticate(None, username='target', password={password!r}) is not None)"
        )
        done = run_manage(["shell", "-c", code], env, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1] == "True"

    assert not logs_in("guess-1") and not logs_in("guess-2"), "process 1 and 2"
    assert logs_in(PASSWORD), "under its budget: the name still logs in"
    assert not logs_in("guess-3")
    assert not logs_in(PASSWORD), "three failures in three processes: refused"
    forget_failures()
