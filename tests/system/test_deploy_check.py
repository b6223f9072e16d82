"""Production settings: `manage.py check --deploy` is clean with the production environment, the
development defaults (embedded `make crawl`, the tests) stay plain http, and with DEBUG off no
placeholder secret gets through (crawlproject/envsafety.py)."""

import os
import secrets
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from crawlproject.envsafety import kept_secret_key
from tests.conftest import BASE_DIR

PRODUCTION = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "DJANGO_ALLOWED_HOSTS": "crawl.example.com,127.0.0.1",
    "DJANGO_BEHIND_HTTPS_PROXY": "1",
}


def deploy_check(tmp_path, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env |= {"DJANGO_SETTINGS_MODULE": "crawlproject.settings", "CRAWLHUB_VAR_DIR": str(tmp_path), **extra}
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_reports_no_issues_with_the_production_environment(tmp_path):
    done = deploy_check(tmp_path, **PRODUCTION)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_it_warns_when_the_production_switch_is_off(tmp_path):
    done = deploy_check(tmp_path, **(PRODUCTION | {"DJANGO_BEHIND_HTTPS_PROXY": "0"}))
    assert done.returncode != 0
    for code in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert code in done.stderr


def test_it_keeps_plain_http_for_development(settings):
    assert settings.SECURE_SSL_REDIRECT is False
    assert settings.SESSION_COOKIE_SECURE is False
    assert settings.SECURE_HSTS_SECONDS == 0


def test_it_redirects_to_https_but_lets_prometheus_scrape_over_the_internal_network(db, client, settings):
    settings.SECURE_SSL_REDIRECT = True
    login = client.get("/admin/login/")
    assert (login.status_code, login["Location"]) == (301, "https://testserver/admin/login/")
    assert client.get("/metrics").status_code == 401  # asked for its token, not redirected


def manage_check(tmp_path, **extra: str) -> subprocess.CompletedProcess:
    """`manage.py check` with DEBUG off and none of the environment's secrets but the ones given."""
    secret = ("DJANGO_", "DATABASE_URL", "AWS_", "FLOWER_", "CRAWLHUB_METRICS_TOKEN")
    env = {k: v for k, v in os.environ.items() if not k.startswith(secret)}
    env |= {
        "DJANGO_SETTINGS_MODULE": "crawlproject.settings",
        "CRAWLHUB_VAR_DIR": str(tmp_path),
        "DJANGO_DEBUG": "False",
    }
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=BASE_DIR,
        env=env | extra,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DJANGO_SECRET_KEY", "change-me-to-a-long-random-string"),
        ("DJANGO_SECRET_KEY", ""),
        ("DJANGO_SECRET_KEY", "too-short-but-random-8f2k"),
        ("DATABASE_URL", "postgres://crawlhub:change-me-postgres-password@127.0.0.1:5432/crawlhub"),
        ("AWS_SECRET_ACCESS_KEY", "change-me-minio-password"),
        ("AWS_SECRET_ACCESS_KEY", "minioadmin"),
        ("FLOWER_BASIC_AUTH", "admin:change-me-flower-password"),
        ("CRAWLHUB_METRICS_TOKEN", "CHANGEME"),
        ("CRAWLHUB_METRICS_TOKEN", "token-for-example-com"),
        ("CRAWLHUB_METRICS_TOKEN", "Qz"),
        ("FLOWER_BASIC_AUTH", "admin:"),
        ("FLOWER_BASIC_AUTH", "ops:Vq8rT2pLx9sWm4cZ,admin"),
    ],
)
def test_it_refuses_to_start_with_debug_off_on_a_placeholder_secret(tmp_path, name, value):
    done = manage_check(tmp_path, **{name: value})
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and name in done.stderr
    assert not value or value not in done.stderr, "the secret itself is never printed"


def test_it_names_every_placeholder_of_the_example_env(tmp_path):
    lines = (BASE_DIR / ".env.example").read_text().splitlines()
    example = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    example.pop("CRAWLHUB_VAR_DIR")  # /app/var: the container's
    done = manage_check(tmp_path, **example)
    assert done.returncode != 0
    for name in (
        "DJANGO_SECRET_KEY",
        "DATABASE_URL",
        "AWS_SECRET_ACCESS_KEY",
        "FLOWER_BASIC_AUTH",
        "CRAWLHUB_METRICS_TOKEN",
    ):
        assert name in done.stderr


def test_it_runs_on_placeholders_with_debug_on_and_on_real_secrets_with_debug_off(tmp_path):
    placeholder = {"DJANGO_SECRET_KEY": "change-me", "AWS_SECRET_ACCESS_KEY": "change-me-minio-password"}
    assert manage_check(tmp_path, DJANGO_DEBUG="True", **placeholder).returncode == 0
    real = {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DATABASE_URL": f"postgres://crawlhub:{secrets.token_urlsafe(20)}@db.example.com:5432/crawlhub",
        "FLOWER_BASIC_AUTH": f"admin:{secrets.token_urlsafe(20)}",
    }
    done = manage_check(tmp_path, **real)
    assert done.returncode == 0, done.stderr


def test_the_embedded_sqlite_database_is_readable_by_its_user_only(tmp_path):
    done = manage_check(tmp_path)
    assert done.returncode == 0, done.stderr
    database = tmp_path / "db.sqlite3"
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
    database.chmod(0o644)  # made by an earlier version
    assert manage_check(tmp_path).returncode == 0
    assert stat.S_IMODE(database.stat().st_mode) == 0o600


def test_without_settings_debug_is_off_and_only_local_host_names_are_served(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); from django.conf import settings as s; "
         "print(s.DEBUG, sorted(s.ALLOWED_HOSTS))"],
        cwd=BASE_DIR,
        env={k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
        | {"DJANGO_SETTINGS_MODULE": "crawlproject.settings", "CRAWLHUB_VAR_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert done.stdout.split("\n")[-2] == "False ['127.0.0.1', '[::1]', 'localhost']", done.stderr


def test_it_generates_a_private_secret_key_once_when_none_is_set(tmp_path):
    for _ in range(2):
        done = manage_check(tmp_path)  # the embedded default: no .env, no DJANGO_SECRET_KEY, DEBUG off
        assert done.returncode == 0, done.stderr
    key_file = tmp_path / "secret-key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text().strip()
    assert len(key) >= 50 and kept_secret_key(tmp_path) == key


def test_processes_starting_together_agree_on_the_generated_key(tmp_path):
    with ThreadPoolExecutor(8) as pool:
        keys = set(pool.map(lambda _: kept_secret_key(tmp_path), range(32)))
    assert len(keys) == 1 and [p.name for p in tmp_path.iterdir()] == ["secret-key"]
