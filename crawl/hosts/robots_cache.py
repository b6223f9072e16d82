"""robots.txt per origin: a process cache over a shared table, fetched through the guarded client.

Only real answers (2xx rules, 4xx = allow all) are shared for CRAWL_ROBOTS_CACHE_SECONDS. A 5xx
or a network failure disallows the origin for now, but is remembered only briefly in this
process, so the pages it holds back are retried like any transient failure. A refusal by the
address guard is never shared: it depends on the project's private-network setting, not on the
origin.
"""

import asyncio
import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from core.batchsql import upsert
from core.net.client import FetchLimits, fetch, runner
from core.robots import MAX_ROBOTS_BYTES, RobotsPolicy, policy_from_response, robots_text
from crawl.models import RobotsTxt

_LOCAL: dict[tuple[str, bool], tuple[float, RobotsPolicy]] = {}
ANSWER_SECONDS = 300
FAILURE_SECONDS = 10
ROBOTS_REDIRECT_HOPS = 5  # RFC 9309 2.3.1.2: follow at least five redirects


def robots_limits() -> FetchLimits:
    """The site-wide timeouts; the first 500 KiB of a huge file are kept and parsed (RFC 9309 2.5)."""
    return FetchLimits(
        connect_timeout=settings.CRAWL_CONNECT_TIMEOUT,
        read_timeout=settings.CRAWL_READ_TIMEOUT,
        total_timeout=settings.CRAWL_TOTAL_TIMEOUT,
        max_bytes=MAX_ROBOTS_BYTES + 65536,
        truncate=True,
    )


def robots_policies(
    origins: set[str], *, allow_private: bool, user_agent: str, proxy: str = ""
) -> dict[str, RobotsPolicy]:
    """The policy of each origin: from this process, else the table, else fetched now."""
    now = time.monotonic()
    policies = {}
    for origin in origins:
        cached = _LOCAL.get((origin, allow_private))
        if cached and now < cached[0]:
            policies[origin] = cached[1]
    missing = origins - policies.keys()
    if missing:
        fresh_after = timezone.now() - timedelta(seconds=settings.CRAWL_ROBOTS_CACHE_SECONDS)
        for row in RobotsTxt.objects.filter(origin__in=missing, fetched_at__gte=fresh_after):
            policies[row.origin] = policy_from_response(row.status_code, row.body)
        unknown = sorted(missing - policies.keys())
        client = runner.client(allow_private=allow_private, proxy=proxy)
        answers = runner.run(_fetch_all(client, unknown, user_agent))
        rows = []
        for origin, response in zip(unknown, answers, strict=True):
            policies[origin], row = _policy(origin, response)
            rows += [row] if row is not None else []
        upsert(RobotsTxt, rows, conflict_fields=("origin",), update_fields=("status_code", "body", "fetched_at"))
    for origin in missing:
        ttl = FAILURE_SECONDS if policies[origin].disallow_all else ANSWER_SECONDS
        _LOCAL[(origin, allow_private)] = (now + ttl, policies[origin])
    return policies


async def _fetch_all(client, origins: list[str], user_agent: str) -> list:
    return await asyncio.gather(*(_fetch_robots(client, origin, user_agent) for origin in origins))


async def _fetch_robots(client, origin: str, user_agent: str):
    """The origin's robots.txt answer, redirects followed (the robots.txt of every origin a batch
    needs is fetched at once)."""
    url = f"{origin}/robots.txt"
    for _ in range(ROBOTS_REDIRECT_HOPS + 1):
        response = await fetch(client, url, headers={"User-Agent": user_agent}, limits=robots_limits())
        if not response.is_redirect:
            break
        url = response.location
    return response


def _policy(origin: str, response) -> tuple[RobotsPolicy, RobotsTxt | None]:
    """The origin's policy, and the row to share when the answer is a real one (not a 5xx or a
    network failure)."""
    if response.error_code or response.status_code >= 500:
        code = None if response.error_code else response.status_code
        return policy_from_response(code, "", response.error_code), None
    body = robots_text(response.body) if response.status_code < 300 else ""
    row = RobotsTxt(origin=origin, status_code=response.status_code, body=body, fetched_at=timezone.now())
    return policy_from_response(response.status_code, body), row
