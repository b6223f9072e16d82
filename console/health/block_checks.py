"""The "host blocked" monitor's check: a host that answers block pages (core/blocks.py), with the
evidence of its latest one (crawl's HostBlock: the rule, the URL, the start of the body)."""

from datetime import datetime, timedelta

from console.health.counters import counters_since
from console.health.findings import Finding, minutes_text
from crawl.models import HostBlock, Project

SAMPLE_CHARS = 1000  # of the blocked body, on the alert


def host_blocked(project: Project, t: dict, now: datetime, open_alerts: dict) -> dict:
    """A host that answered at least `min_blocks` block pages in the last `minutes`; back once it
    answered in that time without one."""
    since = now - timedelta(minutes=float(t["minutes"]))
    per_host: dict[str, dict] = {}
    for (_scope, host, metric), n in counters_since(project.id, since, scope="host", whole=True).items():
        per_host.setdefault(host, {})[metric] = per_host.get(host, {}).get(metric, 0) + n
    out = {}
    for host, c in per_host.items():
        blocked, answered = c.get("fetch_blocked", 0), c.get("fetch_ok", 0)
        if blocked and blocked >= t["min_blocks"]:
            out[f"host {host}"] = _finding(project, host, blocked, answered, t)
        elif not blocked and answered:
            out[f"host {host}"] = None
    return out


def _finding(project: Project, host: str, blocked: int, answered: int, t: dict) -> Finding:
    latest = HostBlock.objects.filter(project=project, host=host).first()
    rule = f" (rule '{latest.rule}': {latest.reason[:200]})" if latest else ""
    evidence = {"host": host, "blocked": blocked, "answered": answered}
    if latest is not None:
        evidence |= {
            "rule": latest.rule,
            "reason": latest.reason,
            "url": latest.url,
            "status_code": latest.status_code,
            "sample": latest.sample[:SAMPLE_CHARS],
            "seen_at": latest.seen_at.isoformat(timespec="seconds"),
        }
    return Finding(
        f"{project.name}: {host} answered {blocked} block page{'' if blocked == 1 else 's'} in the last "
        f"{minutes_text(t['minutes'])}{rule}; {answered} real answers",
        evidence,
    )
