"""Block detection in the fetch stage: each project's rules (core/blocks.py), judged on every
answer of a round, and the evidence of what was blocked kept per project and host (HostBlock)."""

import logging
import statistics
import time
from collections import Counter

from django.conf import settings
from django.utils import timezone

from core.blocks import Blocked, BlockRules, block_rules, block_sample, block_verdict
from core.masking import masked_secrets
from core.net.client import FetchResponse
from crawl.models import HostBlock, Page, Project, SessionCookie

log = logging.getLogger("crawlhub.fetch")
USUAL_PAGES = 50  # the host's latest stored pages whose median length is its usual one
USUAL_SECONDS = 60.0  # how long a process keeps a host's usual length
_rules: dict[int, tuple[object, BlockRules]] = {}
_usual: dict[tuple[int, str], tuple[float, int | None]] = {}


def rules_of(project: Project) -> BlockRules:
    """The project's block rules, compiled once per change of its settings."""
    stamp = (project.config_changed_at, project.block_detection)
    kept = _rules.get(project.id)
    if kept is None or kept[0] != stamp:
        rules = block_rules(
            project.block_rules or [], built_in=project.block_detection, scan_bytes=settings.CRAWL_BLOCK_SCAN_BYTES
        )
        _rules[project.id] = kept = (stamp, rules)
    return kept[1]


def blocks_judge(pages: list[Page], responses: list[FetchResponse]) -> dict[int, Blocked]:
    """{page id: Blocked} of the answers that are block pages, by their projects' rules."""
    found = {}
    for page, response in zip(pages, responses, strict=True):
        rules = rules_of(page.project)
        usual = usual_length(page.project_id, page.host) if rules.wants_usual_length else None
        if blocked := block_verdict(rules, response, usual_length=usual):
            found[page.id] = blocked
    return found


def usual_length(project_id: int, host: str) -> int | None:
    """The median body length of the host's latest stored pages of the project (kept a minute)."""
    now = time.monotonic()
    kept = _usual.get((project_id, host))
    if kept is None or now - kept[0] > USUAL_SECONDS:
        rows = Page.objects.filter(project_id=project_id, host=host, content_length__gt=0)
        lengths = list(rows.order_by("-fetched_at").values_list("content_length", flat=True)[:USUAL_PAGES])
        kept = _usual[(project_id, host)] = (now, int(statistics.median(lengths)) if lengths else None)
    return kept[1]


def blocks_record(pages: list[Page], responses: list[FetchResponse], blocks: dict[int, Blocked]) -> None:
    """Keep the latest blocked answer of each project and host, its body's start masked of the
    project's secrets, as the evidence the "host blocked" monitor and the dashboard show."""
    latest, counts = {}, Counter()
    for page, response in zip(pages, responses, strict=True):
        if (blocked := blocks.get(page.id)) is not None:
            latest[(page.project_id, page.host)] = (page, response, blocked)
            counts[(page.project_id, page.host)] += 1
    for (project_id, host), n in counts.items():
        rule = latest[(project_id, host)][2].rule
        log.warning("%d answers of %s were block pages (rule '%s'): retried later", n, host, rule)
    rows = [_evidence(page, response, blocked) for page, response, blocked in latest.values()]
    if rows:
        HostBlock.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["project", "host"],
            update_fields=["url", "rule", "reason", "status_code", "sample", "seen_at"],
        )


def _evidence(page: Page, response: FetchResponse, blocked: Blocked) -> HostBlock:
    secrets = _secrets_of(page.project)
    return HostBlock(
        project_id=page.project_id,
        host=page.host,
        url=page.url,
        rule=blocked.rule[:200],
        reason=masked_secrets(blocked.reason, secrets),
        status_code=response.status_code,
        sample=masked_secrets(block_sample(response), secrets),
        seen_at=timezone.now(),
    )


def _secrets_of(project: Project) -> list[str]:
    """The values a body could echo that people may not read: the project's header and cookie
    values and its session's cookies."""
    values = [str(v) for v in (project.request_headers or {}).values()]
    values += [str(v) for v in (project.cookies or {}).values()]
    values += SessionCookie.objects.filter(project=project).values_list("value", flat=True)
    return values
