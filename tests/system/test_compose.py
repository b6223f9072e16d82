"""docker-compose.yml with .env.example: valid, nine services, all configured from the one .env file.

Validated with Debian's docker-compose 1.29 (`make system-deps` installs it); no Docker engine needed.
"""

import os
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import BASE_DIR

SERVICES = [
    "postgres",
    "redis",
    "minio",
    "web",
    "worker-fetch",
    "worker-extract",
    "worker-download",
    "beat",
    "flower",
]
APP_SERVICES = ["web", "worker-fetch", "worker-extract", "worker-download", "beat", "flower"]

if shutil.which("docker-compose") is None:
    reason = "docker-compose is not installed and we are not root to install it (make system-deps)"
    if os.geteuid() == 0:
        reason = "docker-compose is missing although we are root: run `make system-deps`"
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def compose(project_dir, *args: str) -> subprocess.CompletedProcess:
    """docker-compose on the repository's compose file, with project_dir/.env as the one .env file.
    The shell's variables would win over .env (the tests' own DATABASE_URL...), so it gets none."""
    cmd = ["docker-compose", "-f", str(BASE_DIR / "docker-compose.yml"), "--project-directory", str(project_dir)]
    env = {key: os.environ[key] for key in ("PATH", "HOME") if key in os.environ}
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=60, env=env)


def example_values() -> dict[str, str]:
    lines = (BASE_DIR / ".env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


@pytest.fixture
def env_dir(tmp_path):
    """A directory holding .env copied from .env.example, as `cp .env.example .env` would."""
    shutil.copy(BASE_DIR / ".env.example", tmp_path / ".env")
    return tmp_path


def test_it_validates_with_the_example_env_and_names_the_nine_services(env_dir):
    done = compose(env_dir, "config", "--services")
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == sorted(SERVICES)


def test_it_configures_every_app_service_from_the_one_env_file(env_dir):
    done = compose(env_dir, "config")
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    example = example_values()
    for name in APP_SERVICES:
        environment = services[name]["environment"]
        for key in ("DJANGO_SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "CRAWLHUB_STORAGE"):
            assert environment[key] == example[key], (name, key)
        assert environment["CRAWLHUB_LOG_FORMAT"] == "json"
    assert services["minio"]["environment"]["MINIO_ROOT_PASSWORD"] == example["AWS_SECRET_ACCESS_KEY"]


def test_it_checks_health_and_runs_the_web_service_with_gunicorn_and_static_files(env_dir):
    services = yaml.safe_load(compose(env_dir, "config").stdout)["services"]
    assert {name for name, service in services.items() if "healthcheck" in service} == set(SERVICES)
    web = " ".join(services["web"]["command"])
    assert "collectstatic" in web
    assert "gunicorn -c python:crawlproject.gunicorn_conf crawlproject.wsgi" in web
    assert "mc mb --ignore-existing" in " ".join(services["minio"]["entrypoint"])
    for name in APP_SERVICES:
        assert services[name]["depends_on"]["minio"]["condition"] == "service_healthy"


def test_it_refuses_to_start_without_a_required_setting(env_dir):
    env_file = env_dir / ".env"
    lines = env_file.read_text().splitlines()
    env_file.write_text("\n".join(line for line in lines if not line.startswith("DJANGO_SECRET_KEY=")) + "\n")
    done = compose(env_dir, "config", "--services")
    assert done.returncode != 0
    assert "set DJANGO_SECRET_KEY in .env" in done.stderr


def test_it_publishes_every_port_on_loopback_only(env_dir):
    services = yaml.safe_load(compose(env_dir, "config").stdout)["services"]
    published = {name: service["ports"] for name, service in services.items() if service.get("ports")}
    assert sorted(published) == ["flower", "minio", "web"]
    for name, ports in published.items():
        for port in ports:
            text = port if isinstance(port, str) else f"{port.get('host_ip', '')}:{port['published']}"
            assert text.startswith("127.0.0.1:"), (name, port)


def test_it_keeps_flowers_credentials_off_its_command_line(env_dir):
    flower = yaml.safe_load(compose(env_dir, "config").stdout)["services"]["flower"]
    assert flower["environment"]["FLOWER_BASIC_AUTH"] == example_values()["FLOWER_BASIC_AUTH"]
    assert "basic" not in " ".join(flower["command"]).lower()
    script = (BASE_DIR / "scripts" / "flower.sh").read_text()
    assert "--basic-auth" not in script and "--basic_auth" not in script
