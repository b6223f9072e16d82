"""gallery-dl as an optional subprocess with a fixed argument list (GPL: never imported, never a dependency).

No Django here. gallery-dl opens its own sockets: its only proxy is a gate of core.net.egress for this
run, which checks the address of every connection it makes, to every host, when it connects.
"""

import mimetypes
import os
import re
import shutil
import signal
import subprocess
import tempfile
from urllib.parse import urlsplit

from core.net.egress import gate
from media.downloaders.plain_http import Download, file_sha256

EXECUTABLE = "gallery-dl"
MAX_FILES = 100
RETRIES = 2
DEFAULT_TOTAL_TIMEOUT = 600.0


def gallerydl_available() -> bool:
    return shutil.which(EXECUTABLE) is not None


def gallerydl_download(
    url: str,
    *,
    tmp_dir: str,
    max_bytes: int,
    socket_timeout: float,
    allow_private: bool,
    user_agent: str,
    proxy: str = "",
    total_timeout: float = DEFAULT_TOTAL_TIMEOUT,
) -> list[Download]:
    """Run gallery-dl on url; never raises.

    Returns one Download per file it produced (each file directly under tmp_dir as
    `gallerydl-*.<ext>`, removed by Download.discard(); files over max_bytes come back as
    body_too_large errors with no file), [] when it found nothing, or a single error Download
    when it could not run or failed (then nothing is left behind).
    """
    executable = shutil.which(EXECUTABLE)
    if executable is None:
        return [_failed(url, "downloader_unavailable", f"{EXECUTABLE} is not installed")]
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        return [_failed(url, "invalid_url", f"not an http(s) URL: {url[:200]}")]
    destination = ""
    try:
        with gate(allow_private=allow_private, upstream=proxy) as way_out:
            destination = tempfile.mkdtemp(dir=tmp_dir, prefix="gallerydl-")
            command = _command(executable, url, destination, max_bytes, socket_timeout, user_agent, way_out.url)
            returncode, stderr = _run(command, total_timeout)
        if returncode != 0 and way_out.refusals:
            return [_failed(url, "blocked_address", way_out.refusals[0])]
        if returncode != 0:
            return [_failed(url, "gallerydl_error", f"gallery-dl exited with status {returncode}: {stderr}")]
        return _adopt_all(url, destination, tmp_dir, max_bytes)
    except subprocess.TimeoutExpired:
        return [_failed(url, "total_timeout", f"gallery-dl did not finish within {total_timeout:g} s")]
    except Exception as exc:
        return [_failed(url, "gallerydl_error", f"{exc.__class__.__name__}: {exc}")]
    finally:
        if destination:
            shutil.rmtree(destination, ignore_errors=True)


def _command(executable, url, destination, max_bytes, socket_timeout, user_agent, proxy) -> list[str]:
    # Fixed here only: no config file, no cookies, no post-processors, no state kept between runs.
    # .part files stay on (the default) so an interrupted download is never taken for a whole file.
    return [
        executable,
        "--config-ignore",
        "--no-colors",
        "--destination",
        destination,
        "--filesize-max",
        str(max_bytes),
        "--http-timeout",
        f"{socket_timeout:g}",
        "--retries",
        str(RETRIES),
        "--user-agent",
        user_agent,
        "--proxy",
        proxy,
        "--no-mtime",
        "--range",
        f"1-{MAX_FILES}",
        "-o",
        "cache.file=null",
        "--",
        url,
    ]


def _run(command: list[str], timeout: float) -> tuple[int, str]:
    """Run in its own process group so a timeout kills gallery-dl and anything it started."""
    proc = subprocess.Popen(
        command,
        env=child_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        text=True,
        errors="replace",
    )
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return proc.returncode, _last_line(stderr)


SECRET_NAMES = re.compile(r"SECRET|PASSWORD|TOKEN|_KEY|CREDENTIAL|DATABASE|BROKER|BASIC_AUTH|^AWS_|PROXY", re.I)


def child_env() -> dict[str, str]:
    """The environment of a program we run on hostile input: ours without secrets (database,
    broker and storage credentials) and without proxy settings (its only proxy is its gate)."""
    return {k: v for k, v in os.environ.items() if not SECRET_NAMES.search(k)}


def _produced_files(destination: str) -> list[str]:
    found = []
    for root, _dirs, names in os.walk(destination):
        for name in names:
            path = os.path.join(root, name)
            if not name.endswith(".part") and os.path.isfile(path) and not os.path.islink(path):
                found.append(path)
    return sorted(found)[:MAX_FILES]


def _adopt_all(url: str, destination: str, tmp_dir: str, max_bytes: int) -> list[Download]:
    downloads: list[Download] = []
    try:
        for path in _produced_files(destination):
            downloads.append(_adopt(url, path, destination, tmp_dir, max_bytes))
    except Exception:
        for download in downloads:
            download.discard()
        raise
    return downloads


def _adopt(url: str, path: str, destination: str, tmp_dir: str, max_bytes: int) -> Download:
    """Move one produced file directly under tmp_dir; a remote name is kept as metadata, never as a path."""
    relative = os.path.relpath(path, destination)
    size = os.path.getsize(path)
    if size > max_bytes:
        return _failed(url, "body_too_large", f"{relative}: {size} bytes exceeds the {max_bytes}-byte cap")
    ext = os.path.splitext(path)[1].lower()
    fd, final = tempfile.mkstemp(
        dir=tmp_dir, prefix="gallerydl-", suffix=ext if re.fullmatch(r"\.[a-z0-9]{1,10}", ext) else ""
    )
    os.close(fd)
    os.replace(path, final)
    return Download(
        url=url,
        status_code=200,
        path=final,
        sha256=file_sha256(final),
        size=size,
        mime=mimetypes.guess_type(final)[0] or "application/octet-stream",
        metadata={"relative_path": relative},
    )


def _failed(url: str, error_code: str, error_message: str) -> Download:
    return Download(url=url, error_code=error_code, error_message=error_message)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:500] if lines else "no error output"
