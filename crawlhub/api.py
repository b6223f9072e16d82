"""The functions `from crawlhub import ...` offers. Django models are imported inside them, after
setup(), so importing crawlhub works in a plain script."""

import os
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from console.runs.job_runs import Run


def setup() -> None:
    """Configure Django for a script (crawlproject.settings unless DJANGO_SETTINGS_MODULE names
    others); a no-op inside a running Django process."""
    import django
    from django.apps import apps

    if apps.ready:
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crawlproject.settings")
    django.setup()


def project(name: str, **settings: Any):
    """The project called `name` (or named alike: "My Shop" is "my shop!"), created if needed; the
    given settings (fields of a project, e.g. max_pages=500, allow_private=True) overwrite its own.
    Settings given as None are left as they are."""
    setup()
    from crawl.services.projects import project_get_or_create

    return project_get_or_create(name=name, **settings)


def add_seeds(project, urls: Iterable[str], *, kind: str = "page") -> int:
    """Add start URLs (kind: page, sitemap or feed); known ones are kept. Returns the URLs new to
    the frontier. Seeds are checked when they are added, as the API, the admin and the crawl
    command check them: if the crawler refuses any (not a URL, a metadata or internal address
    the project does not allow), ValueError names each and why, and none is added. An active
    project crawls the new ones as a job (its running one, or a new one); a paused one keeps them
    queued."""
    setup()
    from console.models import Job
    from console.runs.steering import seeds_add_as_job

    urls = list(urls)
    seeds_check(project, urls)
    _job, new_ids = seeds_add_as_job(project=project, urls=urls, kind=kind, trigger=Job.Trigger.COMMAND)
    return len(new_ids)


def seeds_check(project, urls: list[str]) -> None:
    """ValueError naming each URL the crawler would refuse as a seed of the project, and why."""
    from crawl.services.projects import seed_problem

    problems = [
        f"{url}: {p}".replace("(a project may allow private networks)", "(allow_private=True allows it)")
        for url in urls
        if (p := seed_problem(url, allow_private=project.allow_private))
    ]
    if problems:
        raise ValueError("seeds refused (none added): " + "; ".join(problems))


def run(
    project,
    *,
    urls: Iterable[str] = (),
    sitemaps: Iterable[str] = (),
    feeds: Iterable[str] = (),
    recrawl: bool = False,
    workers: int | None = None,
    timeout: float = 0,
    on_progress: Callable[[dict, float], None] | None = None,
    progress_every: float = 2.0,
    on_notice: Callable[[str], None] | None = None,
) -> "Run":
    """Run a job of the project until it owes no more work (or `timeout` seconds, 0: no limit).

    The job is the project's running one, its paused one (resumed), or a new one (a recrawl with
    `recrawl`, which fetches every finished page again). `urls`, `sitemaps` and `feeds` are seeds
    added in the job. With the embedded broker, `workers` worker processes (default 2) are started
    and stopped here; with a real broker the external workers do the work (default 0). Ctrl-C or
    SIGTERM stops the embedded workers and pauses the job: run it again to resume. Progress
    (pages and assets by state) goes to `on_progress(progress, elapsed)` every `progress_every`
    seconds, and notices (a resumed job, an outage, work no worker takes) to `on_notice`."""
    setup()
    from console.runs.job_runs import crawl_run

    seeds_check(project, [*urls, *sitemaps, *feeds])
    return crawl_run(
        project,
        seeds={"page": list(urls), "sitemap": list(sitemaps), "feed": list(feeds)},
        recrawl=recrawl,
        workers=workers,
        timeout=timeout,
        on_progress=on_progress,
        progress_every=progress_every,
        on_notice=on_notice,
    )


def items(project, *, kind: str | None = None, job=None) -> Iterator[dict]:
    """The project's extracted items, oldest first, as {"url", "kind", "data", "errors",
    "updated_at"}: of one kind (page, rule:<name>, api, spider) and produced by one job (a Job or
    its id: the items whose data it extracted), when given. Read a chunk at a time: memory stays flat."""
    setup()
    from console.exports.rows import ExportFilter, export_rows

    yield from export_rows(project, "items", ExportFilter(kind=kind, job=getattr(job, "id", job)))
