"""Fair shares between projects for the stages that pull their work from the rows (fetch, extract
and download)."""

import itertools
from collections.abc import Callable


def fair_rows(project_ids: list[int], limit: int, rows_of: Callable[[int, int, int], list]) -> list:
    """Up to `limit` rows, an equal share from each project (`rows_of(project_id, offset, count)`:
    the project's next rows in its own order), a share one project leaves unused going to those
    with more; the shares are interleaved, so a batch cut short still serves every project. Each
    round is one probe per project still offering rows: the cost follows the batch and the number
    of projects, not the size of the backlog."""
    offers: dict[int, list] = {p: [] for p in project_ids}
    projects, wanted = list(project_ids), limit
    while projects and wanted > 0:
        share, full = -(-wanted // len(projects)), []
        for project_id in projects:
            rows = rows_of(project_id, len(offers[project_id]), share)
            offers[project_id] += rows
            if len(rows) == share:
                full.append(project_id)
        wanted = limit - sum(len(rows) for rows in offers.values())
        projects = full
    interleaved = [row for rows in itertools.zip_longest(*offers.values()) for row in rows if row is not None]
    return interleaved[:limit]
