"""Flower (scripts/flower.sh, `make flower`): basic auth, the three stage workers and their queues."""

import os
import subprocess
import sys

import httpx
import pytest

from tests.conftest import BASE_DIR
from tests.helpers import free_port, wait_until

pytestmark = pytest.mark.integration

AUTH = ("user", "pw")
STAGES = ("fetch", "extract", "download")


def flower_script(env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        ["bash", "scripts/flower.sh"],
        cwd=BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )


@pytest.fixture
def flower(worker_env, broker):
    port = free_port()
    env = worker_env | {"FLOWER_BASIC_AUTH": "user:pw", "FLOWER_PORT": str(port), "PYTHON": sys.executable}
    proc = flower_script(env)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=15)
    try:
        yield client, proc
    finally:
        client.close()
        proc.terminate()
        output, _ = proc.communicate(timeout=20)
        print(output[-3000:])


def poll(client: httpx.Client, proc: subprocess.Popen, path: str, done, timeout: float = 45, parse=httpx.Response.json):
    """GET path (with basic auth) until done(parsed body) holds; returns the parsed body."""

    def answered() -> tuple | None:  # the body in a tuple: an empty body that is done is an answer
        assert proc.poll() is None, "flower exited"
        try:
            response = client.get(path, auth=AUTH)
            if response.status_code == 200 and done(parse(response)):
                return (parse(response),)
        except httpx.TransportError:
            pass
        return None

    return wait_until(answered, timeout=timeout, interval=0.5, what=f"GET {path}")[0]


def test_it_refuses_to_start_without_basic_auth():
    env = {k: v for k, v in os.environ.items() if k != "FLOWER_BASIC_AUTH"} | {"PYTHON": sys.executable}
    proc = flower_script(env)
    output, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "FLOWER_BASIC_AUTH" in output


def test_it_lists_the_stage_workers_and_their_queues_behind_basic_auth(flower, workers):
    client, proc = flower
    for stage in STAGES:
        workers.start(stage, stage, concurrency=1)
    host = os.uname().nodename
    expected = {f"{stage}@{host}" for stage in STAGES}

    found = poll(client, proc, "/api/workers?refresh=1", lambda data: expected <= set(data))
    consumed = {name: {q["name"] for q in found[name].get("active_queues", [])} for name in expected}
    assert consumed == {f"{stage}@{host}": {stage, "control"} for stage in STAGES}, "every worker also takes control"

    lengths = poll(client, proc, "/api/queues/length", lambda data: data.get("active_queues"))
    assert {q["name"] for q in lengths["active_queues"]} >= set(STAGES)
    assert all(isinstance(q["messages"], int) for q in lengths["active_queues"])

    assert client.get("/api/workers").status_code == 401
    assert client.get("/api/workers", auth=("user", "wrong")).status_code == 401
    online = [f'flower_worker_online{{worker="{name}"}} 1.0' for name in sorted(expected)]
    text = poll(client, proc, "/metrics", lambda t: all(line in t for line in online), parse=lambda r: r.text)
    assert "flower_events_total" in text
