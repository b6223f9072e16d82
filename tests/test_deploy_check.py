"""Production settings: `manage.py check --deploy` is clean with the production environment, and the
development defaults (embedded `make crawl`, the tests) stay plain http."""

import os
import secrets
import subprocess
import sys

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
