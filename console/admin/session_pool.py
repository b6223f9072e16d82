"""The project page's table of its pool of cookie sessions: each live session (and the last ones
retired) with its state, age, uses, errors and cookies, their values masked."""

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.timesince import timesince

from console.masking import masked_map
from crawl.models import CookieSession, Project

SHOWN_RETIRED = 20
HEAD = ("session", "state", "host", "age", "uses", "errors", "last used", "cookies", "retired")


def sessions_table(project: Project) -> str:
    """The sessions as an HTML table; "none" before the project's first fetch."""
    sessions = project.cookie_sessions.prefetch_related("cookies")
    live = list(sessions.filter(slot__isnull=False).order_by("host", "slot"))
    retired = list(sessions.filter(slot__isnull=True).order_by("-retired_at")[:SHOWN_RETIRED])
    if not live and not retired:
        return "none"
    head = format_html_join("", "<th>{}</th>", ((name,) for name in HEAD))
    rows = format_html_join("", "<tr>{}</tr>", ((_cells(s),) for s in live + retired))
    return format_html('<table class="cookie-sessions"><tr>{}</tr>{}</table>', head, rows)


def _cells(session: CookieSession):
    now = timezone.now()
    cookies = ", ".join(f"{name}={value}" for name, value in masked_map(_values(session)).items()) or "none"
    last = f"{timesince(session.last_used_at, now)} ago" if session.last_used_at else "never"
    values = (
        session.id,
        session.get_state_display(),
        session.host or "any",
        timesince(session.created_at, now),
        session.uses,
        session.errors,
        last,
        cookies,
        session.retired_reason,
    )
    return format_html_join("", "<td>{}</td>", ((value,) for value in values))


def _values(session: CookieSession) -> dict[str, str]:
    return {cookie.name: cookie.value for cookie in session.cookies.all()}
