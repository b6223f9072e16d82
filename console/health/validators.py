"""What makes a monitor or a notification target invalid, by field: the checks the models' clean(),
the admin and the API run. Imports nothing of the console, so the models module can use it."""

from dataclasses import dataclass
from datetime import time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from scrape.models import RuleSet

# The built-in kinds (Monitor.Kind) and their default thresholds, which a monitor's own override.
DEFAULTS: dict[str, dict] = {
    "site_down": {"minutes": 3, "min_failures": 3},
    "template_changed": {"min_pages": 10, "drop_ratio": 0.5, "recover_ratio": 0.8, "baseline_hours": 24},
    "job_failed": {},
    "job_stalled": {"minutes": 30},
    "no_worker": {},
    "host_backoff": {"minutes": 15},
    "host_blocked": {"minutes": 15, "min_blocks": 3},
    "zero_throughput": {"minutes": 15},
    "sink_failing": {"minutes": 10},
}


@dataclass(frozen=True)
class Rule:
    """What a rule kind of the user's own asks for (its check is in console/health/rules.py)."""

    watch: str  # what `watch` names ("" when the kind watches nothing)
    unit: str  # what the threshold counts
    windowed: bool = True


RULES: dict[str, Rule] = {
    "items_per_run": Rule("a rule set's name", "items per run", windowed=False),
    "fill_rate": Rule("rule set.field", "percent of the items"),
    "errors_per_hour": Rule("an error code (e.g. http_503)", "errors per hour"),
    "pages_per_minute": Rule("", "pages per minute"),
}


def thresholds_problem(kind: str, thresholds) -> str | None:
    """Why `thresholds` cannot be a monitor of `kind`'s overrides, or None."""
    if kind not in DEFAULTS:
        return f"not a monitor kind: {kind!r} (one of {', '.join(DEFAULTS)})"
    if not isinstance(thresholds, dict):
        return "must be a JSON object of threshold names and numbers"
    known = DEFAULTS[kind]
    for name, value in thresholds.items():
        if name not in known:
            return f"{kind} has no threshold {name!r}" + (
                f" (it has {', '.join(known)})" if known else " (it has none)"
            )
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            return f"{name} must be a number of at least 0, not {value!r}"
    return None


def monitor_problems(monitor) -> dict[str, str]:
    """What is wrong with a monitor's settings (a Monitor, saved or not), by field (empty: nothing)."""
    if monitor.kind in RULES:
        return rule_problems(monitor)
    problem = thresholds_problem(monitor.kind, monitor.thresholds)
    return {"thresholds": problem} if problem else {}


def rule_problems(monitor) -> dict[str, str]:
    """What keeps a rule of the user's own from running, by field (empty: nothing)."""
    rule, problems = RULES[monitor.kind], {}
    if not monitor.name.strip():
        problems["name"] = "a rule of your own needs a name"
    if monitor.threshold is None or monitor.threshold < 0:
        problems["threshold"] = f"{rule.unit}: a number of at least 0"
    if rule.windowed and not monitor.window_minutes:
        problems["window_minutes"] = "the minutes it looks back: at least 1"
    if rule.watch and not monitor.watch.strip():
        problems["watch"] = f"what it watches: {rule.watch}"
    elif monitor.kind == "fill_rate" and monitor.project_id and (problem := _field_problem(monitor)):
        problems["watch"] = problem
    return problems


def _field_problem(monitor) -> str | None:
    """A fill rate needs a field its rule set watches (its required ones, or all when none is)."""
    name, _, field = monitor.watch.rpartition(".")
    rules = RuleSet.objects.filter(project_id=monitor.project_id, name=name).first()
    if not name or rules is None:
        return f"rule set.field, of a rule set of this project: no rule set named {name!r}"
    watched = _watched(rules.spec if isinstance(rules.spec, dict) else {})
    if field not in watched:
        return (
            f"rule set {name} watches only {', '.join(watched) or 'no field'} (a rule set with required fields "
            f"watches only those): make '{field}' required, or watch one of them"
        )
    return None


def _watched(spec: dict) -> list[str]:
    required = list(spec.get("required") or [])
    return required or list((spec.get("fields") or {}).keys())


def url_problem(url: str) -> str | None:
    """Why `url` cannot be a notification target, or None."""
    import apprise  # its plugins take ~80 ms to load: only when a target is checked, as before

    if apprise.Apprise.instantiate(url.strip()) is not None:
        return None
    scheme = url.split("://", 1)[0] if "://" in url else "no scheme"
    return (
        f"not an Apprise URL this server can use ({scheme}://...): for example slack://T000/B000/XXXX, "
        "mailtos://user:password@smtp.example.com?to=team@example.com or json://host/path"
    )


def quiet_problems(start: time | None, end: time | None, zone: str) -> dict[str, str]:
    """What is wrong with a target's quiet hours, by field (empty: nothing)."""
    problems = {}
    if (start is None) != (end is None):
        problems["quiet_until" if end is None else "quiet_from"] = "give both ends of the quiet hours, or neither"
    elif start is not None and start == end:
        problems["quiet_until"] = "quiet hours must end at another time than they start"
    try:
        ZoneInfo(zone or "")
    except (ZoneInfoNotFoundError, ValueError):
        problems["quiet_timezone"] = f"not a time zone: {zone!r} (for example UTC or Europe/Paris)"
    return problems
