"""The download stage end to end: real workers, PostgreSQL, Redis, a loopback site made with ffmpeg."""

import hashlib
import json
import subprocess
import sys
import tarfile
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from bench.check import canon_path
from core.storage import key_for
from crawl.models import MediaAsset, PageAsset
from crawl.services.projects import project_get_or_create
from tests.conftest import BASE_DIR, last_json_line, run_manage
from tests.helpers import wait_until
from tests.media_site import build_media_site, make_videos
from tests.servers import Site, SiteServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def videos(tmp_path_factory):
    return make_videos(tmp_path_factory.mktemp("videos"))


@pytest.fixture
def media_site(videos):
    site, truth = build_media_site(videos)
    with SiteServer(site) as server:
        yield server, truth


@pytest.fixture
def media_env(worker_env, tmp_path):
    """Workers and commands of this test keep their files (assets, temp files) under tmp_path."""
    return worker_env | {"CRAWLHUB_VAR_DIR": str(tmp_path / "var")}


def start_stage_workers(workers, env) -> None:
    workers.env = env
    for stage in ("fetch", "extract", "download"):
        workers.start(stage, stage)


def crawl(env: dict, url: str, project: str) -> dict:
    done = run_manage(["crawl", f"{url}/", "--workers", "0", "--json", "--project", project, "--timeout", "240"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    return last_json_line(done.stdout)


def assets_by_path(project: str) -> dict[str, MediaAsset]:
    return {canon_path(a.url): a for a in MediaAsset.objects.filter(project__slug=project)}


def test_it_stores_every_asset_once_by_content_and_links_it_to_every_page(media_site, workers, media_env):
    server, truth = media_site
    project_get_or_create(name="media", allow_private=True, media_page_patterns=r"/video\.html$")
    start_stage_workers(workers, media_env)
    summary = crawl(media_env, server.url, "media")
    assets = assets_by_path("media")
    assert set(assets) == set(truth["referrers"])
    odd = [(p, a.state, a.attempts, a.error_code, a.error_message[:300]) for p, a in assets.items() if a.attempts != 1]
    assert {(a.state, a.attempts) for a in assets.values()} == {("done", 1)}, odd
    assert summary["assets"] == len(assets)

    root = Path(media_env["CRAWLHUB_VAR_DIR"]) / "assets"
    for path, asset in assets.items():
        assert hashlib.sha256((root / asset.storage_key).read_bytes()).hexdigest() == asset.sha256, path
        assert truth["sha256"].get(path, asset.sha256) == asset.sha256, path
        linked = {canon_path(u) for u in PageAsset.objects.filter(asset=asset).values_list("page__url", flat=True)}
        assert linked == truth["referrers"][path], path
    assert len(truth["referrers"]["/img/shared.jpg"]) == 50

    video_page, hls = assets["/video.html"], assets["/hls/stream.m3u8"]
    assert (video_page.downloader, video_page.sha256) == ("ytdlp", truth["sha256"]["/media/clip.mp4"])
    assert hls.downloader == "ytdlp"
    assert hls.size > 1000
    assert hls.metadata["extractor"]
    requests = Counter(server.paths())
    assert [p for p in truth["sha256"] if p != "/media/clip.mp4" and requests[p] != 1] == []
    stored = sorted(p.name for p in (root / "sha256").rglob("*") if p.is_file())
    assert stored == sorted({a.sha256 for a in assets.values()}), "one object per content, nothing else"
    _check_tar_export(media_env, assets, root)


def _check_tar_export(env: dict, assets: dict, root: Path) -> None:
    out = Path(env["CRAWLHUB_VAR_DIR"]) / "assets.tar.gz"
    done = run_manage(["export", "media", "--what", "assets", "--format", "tar.gz", "-o", str(out)], env)
    assert done.returncode == 0, done.stderr
    with tarfile.open(out) as archive:
        manifest = [json.loads(line) for line in archive.extractfile("manifest.jsonl").read().splitlines()]
        members = {m.name: archive.extractfile(m).read() for m in archive.getmembers() if m.name.startswith("assets/")}
    assert {canon_path(r["url"]): r["sha256"] for r in manifest} == {p: a.sha256 for p, a in assets.items()}
    assert set(members) == {f"assets/{a.sha256}" for a in assets.values()}
    for name, data in members.items():
        assert hashlib.sha256(data).hexdigest() == name.removeprefix("assets/")
    assert all(members[r["path"]] is not None and r["state"] == "done" for r in manifest)


def big_file_site(size: int = 24 * 1024 * 1024) -> Site:
    site = Site()
    body = b"\x00\x00\x00\x18ftypmp42" + bytes(size)
    site.files["/"] = (200, {"Content-Type": "text/html"}, b'<a href="/files/big.mp4">the film</a>')
    site.files["/files/big.mp4"] = (200, {"Content-Type": "video/mp4"}, body)
    site.slow["/files/big.mp4"] = 0.02  # about 8 s for the whole file
    return site


@pytest.mark.fault
def test_it_completes_a_download_killed_midway_without_partial_objects(workers, media_env):
    site = big_file_site()
    sha256 = hashlib.sha256(site.files["/files/big.mp4"][2]).hexdigest()
    project_get_or_create(name="bigfile", allow_private=True)
    root = Path(media_env["CRAWLHUB_VAR_DIR"])
    with SiteServer(site) as server:
        start_stage_workers(workers, media_env)
        crawl_proc = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "crawl",
                f"{server.url}/",
                "--workers",
                "0",
                "--json",
                "--project",
                "bigfile",
            ],
            cwd=BASE_DIR,
            env=media_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        partial = _wait_for_partial_download(root / "tmp", crawl_proc)
        workers.kill("download")
        assert partial.exists(), "the killed download's temp file is what the test is about"
        assert not (root / "assets" / key_for(sha256)).exists()
        workers.start("download2", "download")
        out, err = crawl_proc.communicate(timeout=240)
        assert crawl_proc.returncode == 0, out + err

    asset = MediaAsset.objects.get(project__slug="bigfile")
    assert (asset.state, asset.attempts, asset.sha256) == ("done", 2, sha256)
    stored = root / "assets" / asset.storage_key
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == asset.sha256
    assert [p for p in (root / "assets").rglob("*") if p.is_file()] == [stored], "no orphan or partial objects"
    assert list((root / "tmp").iterdir()) == [], "the killed download's temp file was cleaned up"


def _wait_for_partial_download(tmp: Path, proc, timeout: float = 60) -> Path:
    def partial() -> Path | None:
        assert proc.poll() is None, proc.stderr.read()
        parts = [p for p in tmp.glob("*") if p.is_file() and p.stat().st_size > 1024 * 1024] if tmp.exists() else []
        return parts[0] if parts else None

    return wait_until(partial, timeout=timeout, interval=0.1, what="the download to start")


def test_it_stores_the_same_objects_in_s3_and_serves_them_by_presigned_url(media_site, workers, media_env, bucket):
    """The same crawl with CRAWLHUB_STORAGE=s3 against a real S3 API server on loopback."""
    from django.test import override_settings

    from core.storage import object_url
    from tests.s3 import CREDENTIALS, s3_storages

    client, name = bucket
    endpoint = client.meta.endpoint_url
    s3_env = media_env | {
        "CRAWLHUB_STORAGE": "s3",
        "AWS_STORAGE_BUCKET_NAME": name,
        "AWS_S3_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["aws_secret_access_key"],
    }
    server, truth = media_site
    project_get_or_create(name="media-s3", allow_private=True, media_page_patterns=r"/video\.html$")
    start_stage_workers(workers, s3_env)
    crawl(s3_env, server.url, "media-s3")
    assets = assets_by_path("media-s3")
    assert {a.state for a in assets.values()} == {"done"}
    for path, sha256 in truth["sha256"].items():
        assert assets[path].sha256 == sha256
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=name).get("Contents", [])}
    assert keys == {key_for(a.sha256) for a in assets.values()}, "one object per content in the bucket"
    assert not (Path(s3_env["CRAWLHUB_VAR_DIR"]) / "assets").exists(), "nothing went to local disk"

    shared = assets["/img/shared.jpg"]
    with override_settings(STORAGES=s3_storages(endpoint, name)):
        url = object_url(shared.storage_key)
    with urllib.request.urlopen(url, timeout=10) as response:
        assert hashlib.sha256(response.read()).hexdigest() == shared.sha256
