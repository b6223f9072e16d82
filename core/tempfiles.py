"""Temp files of downloads in progress (under VAR_DIR/tmp), and the sweep of what killed ones left."""

import time
from pathlib import Path

from django.conf import settings


def temp_dir() -> Path:
    path = Path(settings.VAR_DIR) / "tmp"
    path.mkdir(parents=True, exist_ok=True)
    return path


def clean_stale_temp(older_than: float) -> int:
    """Remove temp files and folders older than a lease: what killed downloads left behind."""
    removed, cutoff = 0, time.time() - older_than
    for entry in temp_dir().iterdir():
        try:
            if _last_write(entry) < cutoff:
                _remove(entry)
                removed += 1
        except FileNotFoundError:  # its own download finished and removed it meanwhile
            continue
    return removed


def _last_write(path: Path) -> float:
    """A folder is as fresh as the newest file in it (a running yt-dlp download keeps writing)."""
    if not path.is_dir():
        return path.stat().st_mtime
    return max([path.stat().st_mtime, *(_last_write(child) for child in path.iterdir())])


def _remove(path: Path) -> None:
    if path.is_dir():
        for child in path.iterdir():
            _remove(child)
        path.rmdir()
    else:
        path.unlink(missing_ok=True)
