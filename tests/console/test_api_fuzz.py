"""The API's OpenAPI schema validates without a warning, and schemathesis finds no 5xx on the running API."""

import json
import os
import subprocess
import sys

import pytest
from rest_framework.authtoken.models import Token

from core.canonical import url_key
from crawl.models import MediaAsset, Page, Seed
from crawl.services.projects import project_get_or_create
from scrape.models import Item
from tests.conftest import BASE_DIR, FAULTS, run_manage

MAX_EXAMPLES = 5
# The coverage phase (boundary values of every field: thousands of cases, minutes) runs in `make faults`;
# `make test` fuzzes every operation with its examples and generated cases.
PHASES, AT_LEAST = ("examples,coverage,fuzzing", 500) if FAULTS else ("examples,fuzzing", 300)


def test_the_schema_validates_without_warnings_or_errors(tmp_path):
    schema = tmp_path / "schema.yaml"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    done = run_manage(["spectacular", "--validate", "--fail-on-warn", "--file", str(schema)], env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr.lower()
    assert "error" not in done.stderr.lower()
    text = schema.read_text()
    assert "/api/projects/{slug}/export/:" in text
    assert "tokenAuth" in text


@pytest.fixture
def crawled_project() -> dict[str, int | str]:
    """A project with a seed, pages in several states, an item and an asset; returns the path
    parameters that reach them, so the fuzzer gets past 404 into the real code."""
    project = project_get_or_create(name="fuzz", allow_private=True)
    seed = Seed.objects.create(project=project, url="http://127.0.0.1:9/")
    pages = [
        Page(project=project, url=u, url_key=url_key(u), host="127.0.0.1", state=state, status_code=code)
        for u, state, code in [
            ("http://127.0.0.1:9/", "done", 200),
            ("http://127.0.0.1:9/gone", "failed", 404),
            ("http://127.0.0.1:9/next", "queued", None),
        ]
    ]
    Page.objects.bulk_create(pages)
    Page.objects.filter(state="failed").update(error_code="http_404", error_message="Not Found")
    item = Item.objects.create(project=project, page=pages[0], kind="page", data={"title": "Home"})
    asset = MediaAsset.objects.create(project=project, url="http://127.0.0.1:9/a.png", url_key="a" * 64)
    return {
        "slug": project.slug,
        "/api/seeds/{id}/": seed.id,
        "/api/pages/{id}/": pages[0].id,
        "/api/failures/{id}/": pages[1].id,
        "/api/items/{id}/": item.id,
        "/api/assets/{id}/": asset.id,
    }


def toml_value(value: object) -> str:
    """JSON strings, numbers and booleans are valid TOML; a dict becomes an inline table."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def toml_section(entries: dict[str, object]) -> str:
    return "[[operations]]\n" + "".join(f"{key} = {toml_value(value)}\n" for key, value in entries.items())


def schemathesis_config(known: dict[str, int | str]) -> str:
    """Path parameters bound to existing rows (deleting the project would end the run early), and
    no coverage phase for the project's PUT/PATCH: its ~50 fields make thousands of cases that
    POST /api/projects/ already covers."""
    tables = [
        {"include-path-regex": r"\{slug\}", "exclude-method": "DELETE", "parameters": {"path.slug": known["slug"]}},
        {"include-path": "/api/projects/{slug}/", "include-method-regex": "^(PUT|PATCH)$"}
        | {"phases.coverage.enabled": False},
    ]
    tables += [
        {"include-path": path, "exclude-method": "DELETE", "parameters": {"path.id": row_id}}
        for path, row_id in known.items()
        if path.startswith("/")
    ]
    # Try a URL fetches the URL it is given: fuzzed, that could be any host on the internet.
    tables.append({"include-path": "/api/try/", "enabled": False})
    return "\n".join(toml_section(t) for t in tables)


@pytest.mark.integration
def test_fuzzed_requests_never_get_a_server_error(live_server, django_user_model, crawled_project, broker, tmp_path):
    fuzzer = django_user_model.objects.create_user("fuzzer", password="not-used", is_superuser=True)  # every row
    token = Token.objects.create(user=fuzzer)
    config, report = tmp_path / "schemathesis.toml", tmp_path / "schemathesis.json"
    config.write_text(schemathesis_config(crawled_project))
    done = subprocess.run(
        [
            *(sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "--no-color", "run"),
            *(f"{live_server.url}/api/schema/", "--url", live_server.url),
            *("--header", f"Authorization: Token {token.key}"),
            # wsgiref writes headers and body apart: on a kept-alive connection each response would
            # wait for a delayed ACK, so every request closes its connection.
            *("--header", "Connection: close"),
            *("--checks", "not_a_server_error", "--max-examples", str(MAX_EXAMPLES)),
            *("--phases", PHASES, "--generation-database", "none"),
            *("--request-timeout", "30", "--report", "json", "--report-json-path", str(report)),
        ],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = json.loads(report.read_text())
    print(json.dumps({k: summary[k] for k in ("operations", "test_cases", "failures", "running_time")}))
    assert done.returncode == 0, done.stdout[-6000:]
    assert summary["failures"] == [], done.stdout[-6000:]
    assert summary["errors"] == []
    operations = summary["operations"]
    assert operations["tested"] == operations["selected"] == operations["total"] - 1 >= 28, "all but Try a URL"
    assert summary["test_cases"]["generated"] >= AT_LEAST
