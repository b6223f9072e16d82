"""Run user spider code (the debugger's drafts, a deploy's vetting, a deployed version's start()
hook, a draft's sign()) in a child process with a time and a memory limit, so code that loops
forever or eats memory is stopped and the process that asked (a worker, or the web process for a
deploy) goes on. Pure: no Django; the limits are handed in.

The child is `python -m scrape.draft_runner` (it sees only the JSON it is sent, and an environment
without the database URL, broker URL or any secret). Its entry points: scrape/draft_runner.py. Its address space
is capped with RLIMIT_AS and its CPU with RLIMIT_CPU; the wall clock is the parent's timeout.
"""

import base64
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the checkout: the child imports scrape from here
MAX_STDERR_CHARS = 4000


@dataclass(frozen=True)
class Limits:
    seconds: float = 20
    memory_mb: int = 1024


class SandboxStopped(Exception):
    """The child was stopped or died: the message says why, in words for the debugger's page."""


def sandbox_response(*, url: str, status: int, headers: dict, body: bytes, request: dict | None = None) -> dict:
    """One response as the child reads it."""
    encoded = base64.b64encode(body).decode()
    return {"url": url, "status": status, "headers": headers, "body_b64": encoded, "request": request or {}}


def sources_run(sources: dict[str, str], responses: list[dict], *, limits: Limits) -> dict:
    """Each source (by name) compiled and run on every response (made by sandbox_response): for each
    name {"error": {"message", "line"}} or {"runs": [...]} in the order of the responses. Raises
    SandboxStopped when the child overran its limits or died."""
    return sandbox_run({"entry": "run", "sources": sources, "responses": responses}, limits=limits)


def sandbox_run(job: dict, *, limits: Limits) -> dict:
    """One job (its "entry" names what the child does: scrape/draft_runner.py) run in the limited
    child: its JSON answer. Raises SandboxStopped when the child overran its limits or died."""
    payload = json.dumps(job).encode()
    child = subprocess.Popen(
        [sys.executable, "-m", "scrape.draft_runner"],
        cwd=ROOT,
        env=_child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_limited(limits),
        start_new_session=True,
    )
    try:
        out, err = child.communicate(payload, timeout=limits.seconds)
    except subprocess.TimeoutExpired:
        _kill(child)
        raise SandboxStopped(
            f"stopped after {limits.seconds:g} s: the code ran past the sandbox's time limit "
            "(a loop that never ends?); the process that ran it goes on"
        ) from None
    if child.returncode != 0:
        raise SandboxStopped(_death(child.returncode, limits, err.decode(errors="replace")))
    return json.loads(out)


def _child_env() -> dict:
    """Only what Python needs: no database URL, broker URL or secret reaches user code."""
    keep = ("PATH", "LANG", "LC_ALL", "HOME", "TZ")
    return {name: os.environ[name] for name in keep if name in os.environ} | {"PYTHONPATH": str(ROOT)}


def _limited(limits: Limits):
    def apply() -> None:
        memory = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        cpu = int(limits.seconds) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))

    return apply


def _kill(child: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    child.communicate()


def _death(code: int, limits: Limits, stderr: str) -> str:
    tail = stderr[-MAX_STDERR_CHARS:].strip()
    if "MemoryError" in tail:
        return f"stopped: the code needed more than the sandbox's {limits.memory_mb} MB of memory"
    if code in (-signal.SIGXCPU, -signal.SIGKILL):
        return f"stopped after {limits.seconds:g} s of CPU: the code ran past the sandbox's time limit"
    return f"the code's process died (exit {code}): {tail or 'no message'}"
