"""Helpers the test modules share: a free loopback port, a wait for a condition with a deadline,
and a Ctrl-C for a process group."""

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on when asked: for a server about to start, or for a
    connection that must be refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(
    predicate: Callable[[], T],
    *,
    timeout: float = 30.0,
    interval: float = 0.2,
    what: str | Callable[[], str] = "the condition",
) -> T:
    """Call `predicate` every `interval` seconds until it returns something truthy, and return that.
    It is called once more at the deadline; after `timeout` seconds, AssertionError naming `what`
    (a function is called then, to describe the state the test found). An AssertionError the
    predicate raises (a process that must still run, say) ends the wait at once."""
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() >= deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g} s waiting for {described}")
        time.sleep(interval)


def group_interrupt(proc: subprocess.Popen, *, timeout: float = 60) -> None:
    """Stop a process started with its own session as Ctrl-C would (SIGINT to its group), and kill
    the group if it has not ended within `timeout` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
