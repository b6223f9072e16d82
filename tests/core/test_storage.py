"""core.storage on local disk and on a real S3 HTTP endpoint (moto's server on loopback)."""

import hashlib
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

from core import storage as media_storage
from core.storage import (
    StorageUnavailable,
    delete_object,
    key_for,
    list_keys,
    object_exists,
    object_size,
    object_url,
    open_object,
    store_file,
)
from tests.helpers import free_port
from tests.s3 import s3_storages
from tests.servers import Site, SiteServer

BASE_DIR = Path(settings.BASE_DIR)


def write_source(directory: Path, data: bytes) -> tuple[str, str]:
    path = directory / f"download-{uuid.uuid4().hex}"
    path.write_bytes(data)
    return str(path), hashlib.sha256(data).hexdigest()


def all_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.fixture
def on_s3(s3_endpoint, bucket):
    with override_settings(STORAGES=s3_storages(s3_endpoint, bucket[1])):
        yield bucket


@pytest.fixture
def media_root(tmp_path):
    root = tmp_path / "assets"
    stores = {
        "default": {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(root), "base_url": "/assets/"},
        },
        "staticfiles": settings.STORAGES["staticfiles"],
    }
    with override_settings(STORAGES=stores):
        yield root


def bucket_keys(bucket) -> list[str]:
    client, name = bucket
    return [entry["Key"] for entry in client.list_objects_v2(Bucket=name).get("Contents", [])]


# --- Local disk ----------------------------------------------------------------------------------


def test_it_stores_the_same_content_once_on_disk(media_root, tmp_path):
    data = os.urandom(300_000)
    path, sha = write_source(tmp_path, data)
    first = store_file(path, sha256=sha, size=len(data))
    again = store_file(path, sha256=sha, size=len(data))
    assert first == again == f"sha256/{sha[:2]}/{sha[2:4]}/{sha}"
    assert all_files(media_root) == [first]
    assert (media_root / first).read_bytes() == data


def test_it_replaces_a_truncated_file_on_disk(media_root, tmp_path):
    data = b"complete video bytes" * 1000
    path, sha = write_source(tmp_path, data)
    final = media_root / key_for(sha)
    final.parent.mkdir(parents=True)
    final.write_bytes(data[:100])
    store_file(path, sha256=sha, size=len(data))
    assert final.read_bytes() == data
    assert all_files(media_root) == [key_for(sha)]


def test_it_leaves_neither_temp_nor_partial_file_when_a_disk_write_fails(media_root, tmp_path, monkeypatch):
    data = b"x" * 5000
    path, sha = write_source(tmp_path, data)

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(media_storage.os, "replace", failing_replace)
    with pytest.raises(StorageUnavailable, match="No space left"):
        store_file(path, sha256=sha, size=len(data))
    assert all_files(media_root) == []


def test_it_refuses_a_file_whose_size_is_not_the_announced_one(media_root, tmp_path):
    path, sha = write_source(tmp_path, b"12345")
    with pytest.raises(ValueError, match="expected 6"):
        store_file(path, sha256=sha, size=6)
    with pytest.raises(ValueError, match="sha256"):
        store_file(path, sha256="../../etc/passwd", size=5)


def test_it_reads_lists_and_deletes_on_disk(media_root, tmp_path):
    keys = []
    for data in (b"first", b"second object"):
        path, sha = write_source(tmp_path, data)
        keys.append(store_file(path, sha256=sha, size=len(data)))
    (media_root / keys[0]).with_name(".leftover.tmp").write_bytes(b"crash")
    assert sorted(list_keys()) == sorted(keys)
    assert list(list_keys(keys[1][:9])) == [keys[1]]
    with open_object(keys[1]) as handle:
        assert handle.read() == b"second object"
    assert object_size(keys[0]) == 5
    assert object_url(keys[0]) == f"/assets/{keys[0]}"
    delete_object(keys[0])
    delete_object(keys[0])
    assert not object_exists(keys[0])
    assert object_exists(keys[1])
    with pytest.raises(FileNotFoundError):
        object_size(keys[0])


def test_it_lists_nothing_on_an_empty_disk(media_root):
    assert list(list_keys()) == []


# --- S3 (moto's server, a real HTTP endpoint on loopback) ----------------------------------------


def test_it_stores_the_same_content_once_in_s3(on_s3, tmp_path):
    data = os.urandom(100_000)
    path, sha = write_source(tmp_path, data)
    with ThreadPoolExecutor(4) as pool:
        keys = set(pool.map(lambda _: store_file(path, sha256=sha, size=len(data)), range(4)))
    keys.add(store_file(path, sha256=sha, size=len(data)))
    assert keys == {key_for(sha)}
    assert bucket_keys(on_s3) == [key_for(sha)]


def test_it_replaces_a_wrong_size_object_in_s3(on_s3, tmp_path):
    client, name = on_s3
    data = b"the whole file" * 500
    path, sha = write_source(tmp_path, data)
    client.put_object(Bucket=name, Key=key_for(sha), Body=data[:10])
    store_file(path, sha256=sha, size=len(data))
    assert client.get_object(Bucket=name, Key=key_for(sha))["Body"].read() == data
    assert bucket_keys(on_s3) == [key_for(sha)]


def test_it_serves_the_exact_bytes_through_a_presigned_url(on_s3, tmp_path):
    data = os.urandom(70_000)
    path, sha = write_source(tmp_path, data)
    key = store_file(path, sha256=sha, size=len(data))
    url = object_url(key, expires=60)
    assert "X-Amz-Signature=" in url
    assert "X-Amz-Expires=60" in url
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.read() == data


def test_it_signs_urls_for_the_public_endpoint(on_s3, s3_endpoint, tmp_path):
    path, sha = write_source(tmp_path, b"public bytes")
    key = store_file(path, sha256=sha, size=12)
    public = s3_endpoint.replace("127.0.0.1", "localhost")
    with override_settings(AWS_S3_PUBLIC_ENDPOINT_URL=public):
        url = object_url(key)
    assert url.startswith(f"{public}/{on_s3[1]}/{key}?")
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.read() == b"public bytes"


def test_it_reads_lists_and_deletes_in_s3(on_s3, tmp_path):
    keys = []
    for data in (b"first", b"second object"):
        path, sha = write_source(tmp_path, data)
        keys.append(store_file(path, sha256=sha, size=len(data)))
    on_s3[0].put_object(Bucket=on_s3[1], Key="elsewhere/file", Body=b"not media")
    assert sorted(list_keys()) == sorted(keys)
    with open_object(keys[1]) as handle:
        assert handle.read(6) == b"second"
        assert handle.read() == b" object"
    assert object_size(keys[0]) == 5
    delete_object(keys[0])
    delete_object(keys[0])
    assert not object_exists(keys[0])
    assert sorted(bucket_keys(on_s3)) == sorted(["elsewhere/file", keys[1]])
    with pytest.raises(FileNotFoundError):
        open_object(keys[0])
    with pytest.raises(FileNotFoundError):
        object_size(keys[0])


def test_it_raises_unavailable_quickly_when_s3_is_down(tmp_path):
    path, sha = write_source(tmp_path, b"bytes")
    with override_settings(STORAGES=s3_storages(f"http://127.0.0.1:{free_port()}", "crawlhub")):
        started = time.monotonic()
        with pytest.raises(StorageUnavailable, match="unreachable"):
            store_file(path, sha256=sha, size=5)
        with pytest.raises(StorageUnavailable):
            list(list_keys())
    assert time.monotonic() - started < 15


def test_it_raises_unavailable_when_s3_answers_5xx(tmp_path):
    path, sha = write_source(tmp_path, b"bytes")
    with SiteServer(
        Site(default=(503, {}, b"")), keep_alive=False
    ) as server:  # a storage server that is up but failing
        failing = s3_storages(server.url, "crawlhub")
        with override_settings(STORAGES=failing), pytest.raises(StorageUnavailable, match="server error"):
            store_file(path, sha256=sha, size=5)


# --- Settings from the environment ---------------------------------------------------------------

PRINT_STORAGE = """
from crawlproject import settings as s
o = s.STORAGES["default"]["OPTIONS"]
c = o["client_config"]
print(s.STORAGES["default"]["BACKEND"], o["bucket_name"], o["endpoint_url"], o["region_name"],
      o["file_overwrite"], o["querystring_expire"], c.s3, c.signature_version, c.connect_timeout,
      c.read_timeout, c.retries["max_attempts"], s.AWS_S3_PUBLIC_ENDPOINT_URL)
"""


def settings_process(tmp_path, **env) -> subprocess.CompletedProcess:
    environ = {**os.environ, "CRAWLHUB_VAR_DIR": str(tmp_path), **env}
    return subprocess.run(
        [sys.executable, "-c", PRINT_STORAGE], cwd=BASE_DIR, env=environ, capture_output=True, text=True, timeout=30
    )


def test_it_configures_s3_from_the_environment(tmp_path):
    done = settings_process(
        tmp_path,
        CRAWLHUB_STORAGE="s3",
        AWS_STORAGE_BUCKET_NAME="media",
        AWS_S3_ENDPOINT_URL="http://minio:9000",
        AWS_S3_PUBLIC_ENDPOINT_URL="https://media.example.com",
        AWS_QUERYSTRING_EXPIRE="600",
    )
    assert done.returncode == 0, done.stderr
    expected = (
        "storages.backends.s3.S3Storage media http://minio:9000 us-east-1 False 600 "
        "{'addressing_style': 'path'} s3v4 5 30 2 https://media.example.com"
    )
    assert done.stdout.strip() == expected


def test_it_refuses_s3_without_a_bucket(tmp_path):
    done = settings_process(tmp_path, CRAWLHUB_STORAGE="s3", AWS_STORAGE_BUCKET_NAME="")
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr
    assert "AWS_STORAGE_BUCKET_NAME" in done.stderr
