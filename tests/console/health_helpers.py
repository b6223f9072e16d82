"""Counts written as the pipeline writes them (crawl/health.py's signal), at a chosen time."""

from collections import Counter

from console.health.counters import counters_add


def count(project, at, counts: dict, monkeypatch) -> None:
    monkeypatch.setattr("console.health.counters.timezone.now", lambda: at)
    counters_add(None, project_id=project.id, counts=Counter(counts))
    monkeypatch.undo()
