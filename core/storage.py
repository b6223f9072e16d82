"""Content-addressed media storage on Django's default storage: local disk, or S3/MinIO via django-storages.

The only module that imports boto3/botocore. Objects live at `sha256/ab/cd/<sha256>`, are written
atomically and once; an unreachable or failing server surfaces as StorageUnavailable.
"""

import contextlib
import io
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from typing import BinaryIO

import boto3
from boto3.exceptions import S3UploadFailedError
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.files.storage import FileSystemStorage, Storage, storages
from storages.backends.s3 import S3Storage

_SHA256 = re.compile(r"[0-9a-f]{64}")
# Storage instance -> (public endpoint, client) used to presign URLs for browsers.
_public_clients: "weakref.WeakKeyDictionary[Storage, tuple]" = weakref.WeakKeyDictionary()


class StorageUnavailable(Exception):
    """The storage server cannot be reached or answered 5xx, or the disk failed: retry later."""


def key_for(sha256: str) -> str:
    if not _SHA256.fullmatch(sha256):
        raise ValueError(f"not a lowercase hex sha256: {sha256!r}")
    return f"sha256/{sha256[:2]}/{sha256[2:4]}/{sha256}"


def store_file(path: str, *, sha256: str, size: int) -> str:
    """Store the file under its hash once and return the key.

    An object of the right size is kept (nothing uploaded); one of another size, left by a crash, is
    replaced. A reader never sees a partial object at the key. Raises StorageUnavailable on outages.
    """
    key = key_for(sha256)
    if os.path.getsize(path) != size:
        raise ValueError(f"{path} has {os.path.getsize(path)} bytes, expected {size}")
    storage = _storage()
    with _outage_as_unavailable():
        if _stored_size(storage, key) == size:
            return key
        if isinstance(storage, S3Storage):
            _s3_put(storage, key, path)
        else:
            _disk_put(storage, key, path)
    return key


def store_object(key: str, path: str) -> str:
    """Write the file at `key` (replacing what is there), atomically: the result sinks' objects,
    whose names they choose. Raises StorageUnavailable on outages."""
    if key.startswith("sha256/") or ".." in key.split("/") or key.startswith("/"):
        raise ValueError(f"not a key for a named object: {key!r}")
    storage = _storage()
    with _outage_as_unavailable():
        if isinstance(storage, S3Storage):
            _s3_put(storage, key, path)
        else:
            _disk_put(storage, key, path)
    return key


def object_url(key: str, *, expires: int | None = None) -> str:
    """A presigned GET URL on S3 (valid `expires` s, default AWS_QUERYSTRING_EXPIRE); MEDIA_URL + key on disk."""
    storage = _storage()
    if not isinstance(storage, S3Storage):
        return storage.url(key)
    expires = storage.querystring_expire if expires is None else expires
    with _outage_as_unavailable():
        return _presigning_client(storage).generate_presigned_url(
            "get_object", Params={"Bucket": storage.bucket_name, "Key": key}, ExpiresIn=int(expires)
        )


def open_object(key: str) -> BinaryIO:
    """A readable binary stream of the object (close it); FileNotFoundError if there is none."""
    storage = _storage()
    with _outage_as_unavailable():
        if not isinstance(storage, S3Storage):
            return open(storage.path(key), "rb")
        try:
            body = _s3_client(storage).get_object(Bucket=storage.bucket_name, Key=key)["Body"]
        except ClientError as exc:
            if _status(exc) == 404:
                raise FileNotFoundError(key) from exc
            raise
    return io.BufferedReader(_S3Reader(body), buffer_size=1024 * 1024)


def object_size(key: str) -> int:
    """The stored object's size in bytes; FileNotFoundError if there is none."""
    with _outage_as_unavailable():
        size = _stored_size(_storage(), key)
    if size is None:
        raise FileNotFoundError(key)
    return size


def object_exists(key: str) -> bool:
    with _outage_as_unavailable():
        return _stored_size(_storage(), key) is not None


def delete_object(key: str) -> None:
    """Delete the object; deleting a missing one is not an error."""
    storage = _storage()
    with _outage_as_unavailable():
        if isinstance(storage, S3Storage):
            _s3_client(storage).delete_object(Bucket=storage.bucket_name, Key=key)
        else:
            storage.delete(key)


def list_keys(prefix: str = "sha256/") -> Iterator[str]:
    """Every stored key starting with prefix (temp files of unfinished disk writes are not keys)."""
    storage = _storage()
    with _outage_as_unavailable():
        if isinstance(storage, S3Storage):
            pages = (
                _s3_client(storage).get_paginator("list_objects_v2").paginate(Bucket=storage.bucket_name, Prefix=prefix)
            )
            for page in pages:
                yield from (entry["Key"] for entry in page.get("Contents", ()))
        else:
            yield from _disk_keys(storage, prefix)


# --- Backend dispatch and error mapping --------------------------------------------------------


def _storage() -> Storage:
    storage = storages["default"]
    if not isinstance(storage, FileSystemStorage | S3Storage):
        raise ImproperlyConfigured(f"media storage needs FileSystemStorage or S3Storage, not {type(storage)}")
    return storage


def _status(exc: ClientError) -> int:
    return exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0


@contextlib.contextmanager
def _outage_as_unavailable() -> Iterator[None]:
    """Map "the server or disk is failing" to StorageUnavailable; leave client errors (4xx) as they are."""
    try:
        yield
    except (BotoConnectionError, HTTPClientError) as exc:  # refused, timed out, connection dropped
        raise StorageUnavailable(f"storage unreachable: {exc}") from exc
    except ClientError as exc:
        if _status(exc) >= 500:
            raise StorageUnavailable(f"storage server error: {exc}") from exc
        raise
    except S3UploadFailedError as exc:  # boto3 wraps the upload's ClientError (implicit chaining)
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, ClientError) and _status(cause) >= 500:
            raise StorageUnavailable(f"storage server error: {exc}") from exc
        raise
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise StorageUnavailable(f"storage disk error: {exc}") from exc


def _stored_size(storage: Storage, key: str) -> int | None:
    if not isinstance(storage, S3Storage):
        try:
            return os.path.getsize(storage.path(key))
        except FileNotFoundError:
            return None
    try:
        return _s3_client(storage).head_object(Bucket=storage.bucket_name, Key=key)["ContentLength"]
    except ClientError as exc:
        if _status(exc) == 404:
            return None
        raise


# --- Local disk ---------------------------------------------------------------------------------


def _disk_put(storage: FileSystemStorage, key: str, path: str) -> None:
    """Copy to a hidden temp file beside the final path, fsync, then rename over it (atomic on POSIX)."""
    final = storage.path(key)
    directory, name = os.path.split(final)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            shutil.copyfileobj(src, out, 1024 * 1024)
            out.flush()
            os.fsync(out.fileno())
        if storage.file_permissions_mode is not None:
            os.chmod(tmp, storage.file_permissions_mode)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _disk_keys(storage: FileSystemStorage, prefix: str) -> Iterator[str]:
    root = storage.path("")
    start = os.path.join(root, os.path.dirname(prefix))
    for dirpath, dirnames, filenames in os.walk(start, onerror=_raise_unless_missing):
        dirnames.sort()
        for name in sorted(filenames):
            key = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
            if not name.startswith(".") and key.startswith(prefix):
                yield key


def _raise_unless_missing(exc: OSError) -> None:
    if not isinstance(exc, FileNotFoundError):
        raise exc


# --- S3 -----------------------------------------------------------------------------------------


def _s3_client(storage: S3Storage):
    return storage.connection.meta.client


def _s3_put(storage: S3Storage, key: str, path: str) -> None:
    """Upload to the exact key: one PUT, or a multipart upload that only becomes an object when complete.

    Not storage.save(): with file_overwrite=False it would rename on a collision, so two workers storing
    the same content at once could leave a duplicate. Same key, same bytes: the last writer wins harmlessly.
    """
    params = {"ContentType": "application/octet-stream", **storage.get_object_parameters(key)}
    _s3_client(storage).upload_file(path, storage.bucket_name, key, ExtraArgs=params, Config=storage.transfer_config)


def _presigning_client(storage: S3Storage):
    """The storage's own client, or one for AWS_S3_PUBLIC_ENDPOINT_URL (SigV4 signs the host)."""
    public = getattr(settings, "AWS_S3_PUBLIC_ENDPOINT_URL", None)
    if not public:
        return _s3_client(storage)
    cached = _public_clients.get(storage)
    if cached is None or cached[0] != public:
        session = boto3.Session(
            aws_access_key_id=storage.access_key,
            aws_secret_access_key=storage.secret_key,
            aws_session_token=storage.security_token,
        )
        client = session.client(
            "s3", endpoint_url=public, region_name=storage.region_name, config=storage.client_config
        )
        cached = _public_clients[storage] = (public, client)
    return cached[1]


class _S3Reader(io.RawIOBase):
    """A streamed GET body whose mid-stream network failures raise StorageUnavailable."""

    def __init__(self, body):
        self._body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        with _outage_as_unavailable():
            data = self._body.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._body.close()
        super().close()
