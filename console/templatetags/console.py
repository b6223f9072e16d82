"""{% workers_panel %}: the workers alive, their queues, and the stages nobody consumes (admin index)."""

from django import template

from console.runs.workers import jobs_open, pipeline_warnings, workers_alive
from console.selectors import stage_backlog

register = template.Library()


@register.inclusion_tag("console/workers_panel.html")
def workers_panel() -> dict:
    workers = workers_alive()
    return {"workers": workers, "warnings": pipeline_warnings(stage_backlog(), workers=workers, job_open=jobs_open())}
