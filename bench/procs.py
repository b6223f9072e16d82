"""Processes from /proc: CPU ticks, RSS, parents, trees, and who listens on a port. Linux only.

CPU of a process tree is counted as the sum, over its live members, of their own CPU (utime+stime)
plus what they collected from reaped children (cutime+cstime). A child that dies between two
readings is still counted (in its parent's cutime), so short-lived processes are never missed.
"""

import os
from dataclasses import dataclass

HZ = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    start: int  # ticks after boot: (pid, start) names a process even after its pid is reused
    own: int  # utime + stime, ticks
    reaped: int  # cutime + cstime of waited-for children, ticks
    rss: int  # bytes


def proc_read(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2 :].split()  # fields[0] is field 3 (state) of proc(5)
        ppid, own, reaped = int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])
        return Proc(pid, ppid, int(fields[19]), own, reaped, int(fields[21]) * PAGE_BYTES)
    except (OSError, ValueError, IndexError):
        return None


def proc_table() -> dict[int, Proc]:
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            proc = proc_read(int(name))
            if proc:
                table[proc.pid] = proc
    return table


def descendants(table: dict[int, Proc], roots) -> set[int]:
    """The roots that are alive, and every live process below them."""
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found, stack = set(), [r for r in roots if r in table]
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, []))
    return found


def tree_ticks(table: dict[int, Proc], pids) -> int:
    return sum(table[p].own + table[p].reaped for p in pids if p in table)


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def listening_pids(port: int) -> set[int]:
    """Processes holding a listening TCP socket on this port (nginx: the master and its workers)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(cols[9])
    return set(_socket_owners(inodes)) if inodes else set()


def _socket_owners(inodes: set[str]):
    wanted = {f"socket:[{i}]" for i in inodes}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{name}/fd/{fd}") in wanted:
                    yield int(name)
                    break
            except OSError:
                continue


def topmost(table: dict[int, Proc], pids: set[int]) -> set[int]:
    """The pids whose parent is not itself in the set (the masters of a server's processes)."""
    return {p for p in pids if p in table and table[p].ppid not in pids}
