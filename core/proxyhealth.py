"""A proxy pool's arithmetic, without Django: what an answer says of the proxy that carried it, a
proxy's health after it (score, latency, errors in a row, rests), and which proxy each request of a
batch goes through (in turn, sticky per session when asked). fetch/proxy_pool.py stores it."""

import hashlib
from dataclasses import dataclass, replace

OK, ERROR, BLOCKED = "ok", "error", "blocked"
OUTCOMES = (OK, ERROR, BLOCKED)
# The proxy's fault for sure: it could not be reached, refused the tunnel, wants credentials, or said
# so itself (RFC 9209 Proxy-Status with an error). A page that met one is sent again through another.
PROXY_FAULT_CODES = frozenset({"proxy_error"})
PROXY_FAULT_STATUSES = frozenset({407})
# Maybe the proxy's, maybe the site's: they count against the proxy, and the page is retried as usual.
PROXY_ERROR_CODES = frozenset({"connect_error", "connect_timeout", "read_timeout", "total_timeout", "protocol_error"})
PROXY_ERROR_STATUSES = frozenset({502, 504})
SCORE_GAIN, ERROR_KEEPS, BLOCK_KEEPS = 0.1, 0.7, 0.5  # how far one answer moves the 0-100 score
LATENCY_WEIGHT = 0.2  # of the newest answer in the latency average


@dataclass(frozen=True)
class RestRules:
    errors_to_rest: int = 3  # errors or blocks in a row that rest a proxy
    rest_seconds: float = 60.0  # its first rest; each rest in a row doubles it
    max_rest_seconds: float = 3600.0


@dataclass(frozen=True)
class Health:
    score: float = 100.0
    latency_ms: float | None = None
    errors_in_row: int = 0
    rests_in_row: int = 0


def outcome_of(status_code: int | None, error_code: str, headers: dict | None = None) -> str | None:
    """What an answer says of its proxy: ok, error, or None when it says nothing (the request was
    never sent, or the egress guard refused its target). Blocks are the block detector's to say."""
    if proxy_fault(status_code, error_code, headers):
        return ERROR
    if status_code is None:
        return ERROR if error_code in PROXY_ERROR_CODES else None
    return ERROR if status_code in PROXY_ERROR_STATUSES else OK


def proxy_fault(status_code: int | None, error_code: str, headers: dict | None = None) -> bool:
    """Whether the failure was the proxy's for sure (not the site's)."""
    if error_code in PROXY_FAULT_CODES or status_code in PROXY_FAULT_STATUSES:
        return True
    return status_code is not None and "error=" in (headers or {}).get("proxy-status", "")


def after(health: Health, outcome: str, latency_ms: float | None, *, resting: bool, rules: RestRules):
    """(the health after one outcome, seconds to rest now or 0). An error or block while the proxy
    already rests (a request sent before its rest began) counts, but starts no new rest; one after
    its rest (its trial) rests it again, twice as long."""
    if outcome not in OUTCOMES:
        raise ValueError(f"a proxy outcome is one of {OUTCOMES}, not {outcome!r}")
    if outcome == OK:
        latency = _average(health.latency_ms, latency_ms)
        score = health.score + (100.0 - health.score) * SCORE_GAIN
        return Health(score, latency, 0, 0), 0.0
    keeps = ERROR_KEEPS if outcome == ERROR else BLOCK_KEEPS
    worse = replace(health, score=health.score * keeps, errors_in_row=health.errors_in_row + 1)
    if resting or worse.errors_in_row < rules.errors_to_rest:
        return worse, 0.0
    rests = worse.rests_in_row + 1
    seconds = min(rules.max_rest_seconds, rules.rest_seconds * 2 ** min(rests - 1, 30))
    return replace(worse, rests_in_row=rests), seconds


def _average(old: float | None, new: float | None) -> float | None:
    if new is None:
        return old
    return new if old is None else old + (new - old) * LATENCY_WEIGHT


@dataclass(frozen=True)
class Candidate:
    """A proxy of the pool as the pick sees it: in service or not, on trial (back from a rest, not
    yet answered well: one request a batch) or not."""

    key: int
    in_service: bool
    on_trial: bool = False


def in_turn(candidates: list[Candidate], attempts: list[int], session_keys: list[str | None] | None = None):
    """The candidate key for each request (its page's `attempts` so far), or None for all when none
    is in service. Candidates come least recently used first and take the requests in turn; one on
    trial gets one request, the one whose page has spent the fewest attempts (a page is not worn out
    on trials). A request with a session key keeps to its session's proxy."""
    serving = [c for c in candidates if c.in_service]
    if not serving:
        return [None] * len(attempts)
    chosen: list[int | None] = [None] * len(attempts)
    trials = [c.key for c in serving if c.on_trial]
    for key, index in zip(trials, sorted(range(len(attempts)), key=lambda i: attempts[i]), strict=False):
        chosen[index] = key
    steady = [c.key for c in serving if not c.on_trial] or [c.key for c in serving]
    turn = 0
    for index in range(len(attempts)):
        session = session_keys[index] if session_keys else None
        if session is not None:
            chosen[index] = sticky(session, steady)
        elif chosen[index] is None:
            chosen[index], turn = steady[turn % len(steady)], turn + 1
    return chosen


def sticky(session_key: str, keys: list[int]) -> int:
    """The proxy of a session: the same while it serves, and when it rests, only its sessions move
    (rendezvous hashing)."""
    return max(keys, key=lambda k: hashlib.blake2b(f"{session_key}|{k}".encode(), digest_size=8).digest())
