"""The console is one of crawlhub's own servers: no crawl, Try a URL or HTTP sink reaches it, on
the port `serve --port N` was given (without a PORT variable) and at docker-compose's `web:8000`."""

import contextlib
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from django.conf import settings

from core.net import guard
from crawl.apps import own_services
from tests.conftest import BASE_DIR
from tests.helpers import free_port, group_interrupt, wait_until

PASSWORD = "a-long-test-password-9"


@contextlib.contextmanager
def serve(var: Path, port: int):
    """`manage.py serve --port N` on the embedded default, no PORT or HOST in its environment, with
    no workers and no beat: only its web server, which runs Try a URL."""
    drop = ("DATABASE_URL", "CELERY_BROKER_URL", "PORT", "HOST")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env |= {"CRAWLHUB_VAR_DIR": str(var), "CRAWLHUB_ADMIN_PASSWORD": PASSWORD}
    env["DJANGO_SETTINGS_MODULE"] = "crawlproject.settings"
    command = [sys.executable, "manage.py", "serve", "--port", str(port), "--workers", "0", "--no-beat"]
    with open(var / "serve.out", "wb") as out:
        proc = subprocess.Popen(
            command, cwd=BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield proc
    finally:
        group_interrupt(proc)


def _form_token(client: httpx.Client, path: str) -> str:
    html = client.get(path).text
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)


@pytest.mark.integration
def test_try_a_url_on_a_console_served_on_another_port_is_refused(tmp_path):
    var, port = tmp_path / "var", free_port()
    var.mkdir()
    with serve(var, port) as proc:
        log = var / "serve.out"

        def ready() -> bool:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            return "console ready:" in log.read_text(errors="replace")

        wait_until(ready, timeout=120, interval=0.5, what=lambda: log.read_text(errors="replace")[-3000:])
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            token = _form_token(client, "/admin/login/")
            login = {"username": "admin", "password": PASSWORD, "csrfmiddlewaretoken": token, "next": "/admin/"}
            assert client.post("/admin/login/", data=login).status_code == 302
            trial = {"url": f"http://127.0.0.1:{port}/admin/login/", "allow_private": "on"}
            trial["csrfmiddlewaretoken"] = _form_token(client, "/admin/tryurl/")
            html = client.post("/admin/tryurl/", data=trial).text
    assert '<p class="errornote">The trial failed: ' in html, html[-2000:]
    error = html.split('class="errornote">', 1)[1].split("</p>")[0]
    assert "blocked_address" in error and "own servers" in error


def test_the_compose_web_service_is_among_the_refused_services(monkeypatch):
    """docker-compose's workers reach the console as `web` at its container port: refused there."""
    compose = yaml.safe_load((BASE_DIR / "docker-compose.yml").read_text())
    container_port = int(compose["services"]["web"]["ports"][0].rsplit(":", 1)[1])
    web_address = "172.18.0.5"  # what compose's DNS would answer for `web`; nothing is sent to it
    real = socket.getaddrinfo

    def compose_dns(host, *args, **kwargs):
        if host == "web":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (web_address, args[0] if args else 0))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(guard.socket, "getaddrinfo", compose_dns)
    try:
        guard.refuse_services(own_services(settings))
        assert "own servers" in guard.refusal(web_address, container_port, allow_private=True)
        assert guard.refusal(web_address, container_port + 1, allow_private=True) == ""
    finally:
        monkeypatch.undo()
        guard.refuse_services(own_services(settings))
