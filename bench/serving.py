"""Serving the site on loopback for a run: nginx with a generated config in a scratch folder when
nginx is installed, else bench.server in a subprocess; or a server already running (--base-url)."""

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from bench import REPO, BenchError, procs

LOG_FLUSH_WAIT_SECONDS = 1.5  # nginx flushes its buffered access log every second

NGINX_CONF = """\
daemon off;
worker_processes 2;
worker_rlimit_nofile 65536;
{user}pid "{scratch}/nginx.pid";
error_log "{scratch}/error.log" warn;
events {{
    worker_connections 4096;
}}
http {{
    types {{
        text/html html;
        application/xml xml;
        text/plain txt;
        image/jpeg jpg;
        video/mp4 mp4;
    }}
    default_type application/octet-stream;
    log_format bench '$msec $status $request_method "$request_uri" $body_bytes_sent $request_time "$http_user_agent"';
    access_log "{scratch}/access.log" bench buffer=64k flush=1s;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65s;
    keepalive_requests 1000000;
    open_file_cache max=10000 inactive=120s;
    open_file_cache_valid 120s;
    client_body_temp_path "{scratch}/client_body";
    proxy_temp_path "{scratch}/proxy";
    fastcgi_temp_path "{scratch}/fastcgi";
    uwsgi_temp_path "{scratch}/uwsgi";
    scgi_temp_path "{scratch}/scgi";
    map $uri $bench_redirect {{
        default "";
        include "{redirects}";
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        root "{root}";
        index index.html;
        if ($bench_redirect) {{
            return 301 $bench_redirect;
        }}
        location / {{
            try_files $uri $uri/ =404;
        }}
    }}
}}
"""


class ServerError(BenchError):
    pass


class StartedServer:
    """A server this run started (nginx or the fallback), in its own process group."""

    def __init__(self, kind: str, process: subprocess.Popen, port: int, access_log: Path):
        self.kind, self.process, self.port, self.access_log = kind, process, port, access_log
        self.base_url = f"http://127.0.0.1:{port}/"

    def roots(self) -> set[int]:
        return {self.process.pid}

    def log_lines(self) -> list[str]:
        self.stop()  # nginx writes out its buffered log as it quits
        return self.access_log.read_text(errors="replace").splitlines()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful for nginx, a clean stop for the fallback
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


class RunningServer:
    """A server someone else runs (--base-url): its processes found by port, its log read from where it stood."""

    def __init__(self, base_url: str, access_log: Path | None):
        self.kind, self.base_url, self.access_log = "external", base_url, access_log
        parts = urlsplit(base_url)
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.offset = access_log.stat().st_size if access_log and access_log.exists() else 0

    def answers(self) -> bool:
        with socket.socket() as s:
            s.settimeout(3)
            return s.connect_ex((urlsplit(self.base_url).hostname, self.port)) == 0

    def roots(self) -> set[int]:
        table = procs.proc_table()
        return procs.topmost(table, procs.listening_pids(self.port))

    def log_lines(self) -> list[str] | None:
        if not self.access_log:
            return None
        time.sleep(LOG_FLUSH_WAIT_SECONDS)
        with open(self.access_log, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(self.offset if size >= self.offset else 0)  # truncated meanwhile: all of it is ours
            return f.read().decode(errors="replace").splitlines()

    def stop(self) -> None:
        pass


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def site_serve(*, web_root: Path, redirects: Path, port: int, scratch: Path, prefer_nginx: bool = True):
    if not port_free(port):
        raise ServerError(
            f"port {port} on 127.0.0.1 is in use: is a server already serving the site? "
            "Pass --base-url (and --access-log) to use it, or --port for another port"
        )
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    if prefer_nginx and shutil.which("nginx"):
        server = _nginx(web_root.resolve(), redirects.resolve(), port, scratch.resolve())
    else:
        server = _fallback(web_root, redirects, port, scratch)
    _wait_listening(server, scratch)
    return server


def _nginx(web_root: Path, redirects: Path, port: int, scratch: Path) -> StartedServer:
    # Run as root, nginx would hand requests to `nobody`, who may not read a private folder.
    user = f"user {getpass.getuser()};\n" if os.geteuid() == 0 else ""
    conf = NGINX_CONF.format(user=user, scratch=scratch, redirects=redirects, port=port, root=web_root)
    (scratch / "nginx.conf").write_text(conf)
    command = ["nginx", "-p", f"{scratch}/", "-c", str(scratch / "nginx.conf"), "-e", str(scratch / "error.log")]
    return StartedServer("nginx", _spawn(command, scratch / "nginx.out"), port, scratch / "access.log")


def _fallback(web_root: Path, redirects: Path, port: int, scratch: Path) -> StartedServer:
    log = scratch / "access.log"
    command = [sys.executable, "-m", "bench.server", "--root", str(web_root), "--redirects", str(redirects)]
    command += ["--port", str(port), "--log", str(log)]
    return StartedServer("python", _spawn(command, scratch / "server.out"), port, log)


def _spawn(command: list[str], output: Path) -> subprocess.Popen:
    with open(output, "ab") as out:
        return subprocess.Popen(
            command, cwd=REPO, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def _wait_listening(server: StartedServer, scratch: Path, seconds: float = 15) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            break
        with socket.socket() as s, contextlib.suppress(OSError):
            s.connect(("127.0.0.1", server.port))
            return
        time.sleep(0.05)
    server.stop()
    detail = " ".join(p.read_text()[-600:] for p in scratch.glob("*.out")) + _tail(scratch / "error.log")
    raise ServerError(f"the {server.kind} server did not start on port {server.port}: {detail.strip()}")


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-600:] if path.exists() else ""
