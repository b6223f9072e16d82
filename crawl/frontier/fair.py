"""Fair shares between projects for the stages that pull their work from the rows (fetch, extract
and download)."""

from collections.abc import Callable

from crawl.models import Project


def project_weights(*conditions, **filters) -> dict[int, int]:
    """{project id: weight} of the projects matching `conditions` (Q objects) and `filters`, in id order."""
    rows = Project.objects.filter(*conditions, **filters).order_by("id").values_list("id", "weight")
    return {project_id: max(1, weight) for project_id, weight in rows}


def fair_rows(weights: dict[int, int], limit: int, rows_of: Callable[[int, int, int], list]) -> list:
    """Up to `limit` rows shared between projects by weight (`weights`: {project id: weight};
    `rows_of(project_id, offset, count)`: the project's next rows in its own order). A share one
    project leaves unused goes to those with more; the shares are interleaved in proportion to the
    weights, so a batch cut short still serves every project. Each round is one probe per project
    still offering rows: the cost follows the batch and the number of projects, not the size of
    the backlog."""
    offers: dict[int, list] = {p: [] for p in weights}
    projects, wanted = list(weights), limit
    while projects and wanted > 0:
        total, full = sum(weights[p] for p in projects), []
        for project_id in projects:
            share = -(-wanted * weights[project_id] // total)
            rows = rows_of(project_id, len(offers[project_id]), share)
            offers[project_id] += rows
            if len(rows) == share:
                full.append(project_id)
        wanted = limit - sum(len(rows) for rows in offers.values())
        projects = full
    # Row k of a project of weight w takes its place at (k + 1/2) / w: weight 2 gives two rows a turn.
    places = [((k + 0.5) / weights[p], order, row) for order, p in enumerate(offers) for k, row in enumerate(offers[p])]
    return [row for *_, row in sorted(places, key=lambda place: place[:2])][:limit]
