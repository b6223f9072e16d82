"""media.downloaders.gallerydl's subprocess contract, with a fake `gallery-dl` executable first on PATH."""

import hashlib
import json
import os
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from core.net.guard import allow_networks
from media.downloaders.gallerydl import gallerydl_available, gallerydl_download
from tests.servers import RawServer, Victim, answer

URL = "http://127.0.0.1:9/gallery/1"
FAKE = """#!{python}
import json, os, sys, time
args = sys.argv[1:]
with open(os.environ["FAKE_GDL_ARGV"], "w") as f:
    json.dump(args, f)
with open(os.environ["FAKE_GDL_ARGV"] + ".env", "w") as f:
    json.dump(sorted(os.environ), f)
dest = os.path.join(args[args.index("--destination") + 1], "fake", "gallery")
os.makedirs(dest)
def write(name, data):
    with open(os.path.join(dest, name), "wb") as f:
        f.write(data)
mode = os.environ["FAKE_GDL_MODE"]
if mode == "files":
    write("01.jpg", b"a" * 100)
    write("02.png", b"b" * 200)
    write("03.jpg", b"c" * 5000)
    write("04.jpg.part", b"d" * 50)
elif mode == "fail":
    write("01.jpg", b"a" * 100)
    print("[gallery-dl][error] Unsupported URL " + repr(args[-1]), file=sys.stderr)
    sys.exit(64)
elif mode == "hang":
    write("01.jpg", b"a" * 100)
    time.sleep(60)
elif mode == "fetch":  # like the real one: every URL it is told to get, through its --proxy
    import urllib.request
    proxy = args[args.index("--proxy") + 1]
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({{"http": proxy, "https": proxy}}))
    for url in [args[-1], *os.environ.get("FAKE_GDL_MORE", "").split()]:
        try:
            write(url.rsplit("/", 1)[-1] + ".jpg", opener.open(url, timeout=5).read())
        except Exception as exc:
            print("[gallery-dl][error] " + str(exc), file=sys.stderr)
            sys.exit(1)
"""


@pytest.fixture
def fake_gallerydl(tmp_path, monkeypatch):
    """Puts a fake gallery-dl first on PATH; returns a function that sets its mode."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable = bin_dir / "gallery-dl"
    executable.write_text(FAKE.format(python=sys.executable))
    executable.chmod(0o755)
    argv_file = tmp_path / "argv.json"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GDL_ARGV", str(argv_file))

    def use(mode: str) -> Path:
        monkeypatch.setenv("FAKE_GDL_MODE", mode)
        return argv_file

    return use


@pytest.fixture
def tmp_dir(tmp_path) -> str:
    path = tmp_path / "work"
    path.mkdir()
    return str(path)


def run(tmp_dir: str, *, allow_private: bool = True, total_timeout: float = 30.0):
    return gallerydl_download(
        URL,
        tmp_dir=tmp_dir,
        max_bytes=1000,
        socket_timeout=7.5,
        allow_private=allow_private,
        user_agent="crawlhub-test/1.0",
        total_timeout=total_timeout,
    )


def test_it_reports_gallerydl_missing(tmp_path, monkeypatch, tmp_dir):
    monkeypatch.setenv("PATH", str(tmp_path))

    assert gallerydl_available() is False
    [result] = run(tmp_dir)
    assert (result.error_code, result.path) == ("downloader_unavailable", "")
    assert os.listdir(tmp_dir) == []


def test_it_hashes_each_file_and_refuses_oversized_ones(fake_gallerydl, tmp_dir):
    fake_gallerydl("files")

    results = run(tmp_dir)

    assert gallerydl_available() is True
    done = [r for r in results if not r.error_code]
    assert [(r.size, r.mime, r.metadata["relative_path"]) for r in done] == [
        (100, "image/jpeg", "fake/gallery/01.jpg"),
        (200, "image/png", "fake/gallery/02.png"),
    ]
    assert all(r.sha256 == hashlib.sha256(Path(r.path).read_bytes()).hexdigest() for r in done)
    [refused] = [r for r in results if r.error_code]
    assert refused.error_code == "body_too_large" and "03.jpg" in refused.error_message
    assert sorted(os.listdir(tmp_dir)) == sorted(os.path.basename(r.path) for r in done)
    for r in done:
        r.discard()
    assert os.listdir(tmp_dir) == []


def test_it_runs_gallerydl_with_fixed_arguments(fake_gallerydl, tmp_dir, monkeypatch):
    argv_file = fake_gallerydl("files")
    monkeypatch.setenv("DATABASE_URL", "postgres://crawlhub:hunter2@db/crawlhub")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter3")
    monkeypatch.setenv("NO_PROXY", "*")

    run(tmp_dir)

    args = json.loads(argv_file.read_text())
    assert "--config-ignore" in args
    assert args[args.index("--filesize-max") + 1] == "1000"
    assert args[args.index("--http-timeout") + 1] == "7.5"
    assert args[args.index("--user-agent") + 1] == "crawlhub-test/1.0"
    assert args[args.index("--proxy") + 1].startswith("http://127.0.0.1:")  # its egress gate
    assert args[-2:] == ["--", URL]
    seen_env = json.loads(Path(f"{argv_file}.env").read_text())
    assert "PATH" in seen_env and not {"DATABASE_URL", "AWS_SECRET_ACCESS_KEY", "NO_PROXY"} & set(seen_env)


def test_it_reports_a_failed_run_and_leaves_nothing(fake_gallerydl, tmp_dir):
    fake_gallerydl("fail")

    [result] = run(tmp_dir)

    assert result.error_code == "gallerydl_error"
    assert result.error_message == f"gallery-dl exited with status 64: [gallery-dl][error] Unsupported URL '{URL}'"
    assert os.listdir(tmp_dir) == []


def test_it_kills_a_hung_run(fake_gallerydl, tmp_dir):
    fake_gallerydl("hang")
    started = time.monotonic()

    [result] = run(tmp_dir, total_timeout=1.0)

    assert time.monotonic() - started < 10
    assert result.error_code == "total_timeout"
    assert os.listdir(tmp_dir) == []


def test_every_host_it_fetches_from_passes_the_gate(fake_gallerydl, tmp_dir, monkeypatch):
    """The first host is public (127.0.0.2, an allowed network here); the second is a loopback
    victim: the gate refuses it, and the victim's own count shows no connection reached it."""
    fake_gallerydl("fetch")
    victim = Victim()
    allow_networks(["127.0.0.2/32"])
    try:
        with RawServer(answer(body=b"image bytes"), host="127.0.0.2") as public:
            monkeypatch.setenv("FAKE_GDL_MORE", f"http://127.0.0.1:{victim.port}/secret")
            [result] = gallerydl_download(
                public.url("/first"),
                tmp_dir=tmp_dir,
                max_bytes=1000,
                socket_timeout=5,
                allow_private=False,
                user_agent="crawlhub-test/1.0",
            )
            assert public.accepted == 1
    finally:
        allow_networks(settings.CRAWL_ALLOWED_NETWORKS)
        victim.close()
    assert result.error_code == "blocked_address"
    assert "127.0.0.1" in result.error_message
    assert victim.accepted == 0
    assert os.listdir(tmp_dir) == []
