"""robots.txt per origin: a process cache over a shared table, fetched through the guarded client."""

import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from crawl.fetcher import FetchLimits, fetch, runner
from crawl.models import RobotsTxt
from crawl.robots import MAX_ROBOTS_BYTES, RobotsPolicy, policy_from_response

_LOCAL: dict[str, tuple[float, RobotsPolicy]] = {}
LOCAL_SECONDS = 300
ROBOTS_REDIRECT_HOPS = 5  # RFC 9309 2.3.1.2: follow at least five redirects
ROBOTS_LIMITS = FetchLimits(connect_timeout=10, read_timeout=15, total_timeout=30, max_bytes=MAX_ROBOTS_BYTES)


def robots_policies(origins: set[str], *, allow_private: bool, user_agent: str) -> dict[str, RobotsPolicy]:
    """The policy of each origin: from this process, else the table, else fetched now."""
    now = time.monotonic()
    policies = {o: _LOCAL[o][1] for o in origins if o in _LOCAL and now - _LOCAL[o][0] < LOCAL_SECONDS}
    missing = origins - policies.keys()
    if missing:
        fresh_after = timezone.now() - timedelta(seconds=settings.CRAWL_ROBOTS_CACHE_SECONDS)
        for row in RobotsTxt.objects.filter(origin__in=missing, fetched_at__gte=fresh_after):
            policies[row.origin] = policy_from_response(row.status_code, row.body, row.error)
        for origin in missing - policies.keys():
            policies[origin] = _fetch_and_store(origin, allow_private=allow_private, user_agent=user_agent)
    for origin in missing:
        _LOCAL[origin] = (now, policies[origin])
    return policies


def _fetch_and_store(origin: str, *, allow_private: bool, user_agent: str) -> RobotsPolicy:
    client = runner.client(allow_private=allow_private)
    url = f"{origin}/robots.txt"
    for _ in range(ROBOTS_REDIRECT_HOPS + 1):
        response = runner.run(fetch(client, url, headers={"User-Agent": user_agent}, limits=ROBOTS_LIMITS))
        if not response.is_redirect:
            break
        url = response.location
    status = None if response.error_code else response.status_code
    body = response.body.decode("utf-8", errors="replace") if status and status < 300 else ""
    RobotsTxt.objects.update_or_create(
        origin=origin,
        defaults={"status_code": status, "body": body, "error": response.error_code, "fetched_at": timezone.now()},
    )
    return policy_from_response(status, body, response.error_code)


def forget_robots() -> None:
    _LOCAL.clear()
