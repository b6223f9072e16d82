"""Content-addressed storage on Django's default storage (local disk, or S3/MinIO via STORAGES)."""

from django.core.files import File
from django.core.files.storage import storages


def key_for(sha256: str) -> str:
    return f"sha256/{sha256[:2]}/{sha256[2:4]}/{sha256}"


def store_file(path: str, *, sha256: str, size: int) -> str:
    """Store the file under its hash once. An object of the wrong size (a crash mid-write) is replaced."""
    storage = storages["default"]
    key = key_for(sha256)
    if storage.exists(key):
        if storage.size(key) == size:
            return key
        storage.delete(key)
    with open(path, "rb") as handle:
        saved = storage.save(key, File(handle, name=key))
    if saved != key:  # another worker stored the same content meanwhile: keep one copy
        storage.delete(saved)
    return key
