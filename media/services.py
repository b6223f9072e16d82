"""The download stage and asset bookkeeping: link assets to pages, claim, download, store, finish."""

import asyncio
import logging
import uuid
from dataclasses import replace
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from crawl.db import insert_new
from crawl.fetcher import FetchLimits, is_transient, runner
from crawl.models import Page, Project
from crawl.services.fetching import allows_private, fetch_limits, user_agent_of
from crawl.services.frontier import project_scope
from crawl.urls import InvalidURL, canonicalize, host_in_domains, host_of, url_key

from .downloader import Download, download
from .models import MediaAsset, PageAsset
from .storage import store_file

log = logging.getLogger("crawlhub.media")
PENDING = (MediaAsset.State.QUEUED, MediaAsset.State.LEASED)


def assets_link_many(*, project: Project, refs_by_page: dict[int, list[tuple[str, str]]]) -> tuple[list[int], set]:
    """Record pages' media: one asset row per URL, one link row per page and asset.

    Returns the ids of assets new to the project and the ids of pages with an asset still pending.
    Inserts go in key order so concurrent batches take index locks in the same order.
    """
    domains = project_scope(project).domains
    assets: dict[str, MediaAsset] = {}
    keys_by_page: dict[int, set[str]] = {}
    now = timezone.now()
    for page_id, refs in refs_by_page.items():
        for raw, kind in refs:
            try:
                canonical = canonicalize(raw)
            except InvalidURL:
                continue
            if domains and not host_in_domains(host_of(canonical), domains):
                continue
            key = url_key(canonical)
            assets.setdefault(key, MediaAsset(project=project, url=canonical, url_key=key, kind=kind, enqueued_at=now))
            keys_by_page.setdefault(page_id, set()).add(key)
    if not assets:
        return [], set()
    new_ids = insert_new(MediaAsset, [assets[k] for k in sorted(assets)], conflict_fields=("project", "url_key"))
    known = dict(
        (key, (aid, state))
        for aid, key, state in MediaAsset.objects.filter(project=project, url_key__in=assets.keys()).values_list(
            "id", "url_key", "state"
        )
    )
    links = sorted((pid, known[k][0]) for pid, keys in keys_by_page.items() for k in keys)
    PageAsset.objects.bulk_create([PageAsset(page_id=p, asset_id=a) for p, a in links], ignore_conflicts=True)
    pending = {pid for pid, keys in keys_by_page.items() if any(known[k][1] in PENDING for k in keys)}
    return new_ids, pending


def assets_claim(asset_ids: list[int]) -> tuple[uuid.UUID, list[MediaAsset]]:
    """Lease queued (due) or lease-expired assets with one compare-and-set UPDATE."""
    now, token = timezone.now(), uuid.uuid4()
    free = Q(state=MediaAsset.State.QUEUED) | Q(state=MediaAsset.State.LEASED, lease_expires_at__lt=now)
    MediaAsset.objects.filter(free, id__in=asset_ids, next_fetch_at__lte=now).update(
        state=MediaAsset.State.LEASED,
        lease_token=token,
        attempts=F("attempts") + 1,
        lease_expires_at=now + timedelta(seconds=settings.CRAWL_LEASE_SECONDS),
    )
    return token, list(MediaAsset.objects.filter(id__in=asset_ids, lease_token=token).select_related("project"))


def assets_download(*, asset_ids: list[int], worker: str = "") -> list[int]:
    """Download the claimable assets among asset_ids into storage; return the ids finished."""
    token, assets = assets_claim(asset_ids)
    if not assets:
        return []
    tmp_dir = settings.VAR_DIR / "tmp"
    tmp_dir.mkdir(parents=True, exist_ok=True)
    limits = replace(
        fetch_limits(), max_bytes=settings.CRAWL_MAX_MEDIA_BYTES, total_timeout=settings.CRAWL_MEDIA_TOTAL_TIMEOUT
    )
    results = runner.run(_download_all(assets, limits, str(tmp_dir)))
    finished = [a.id for a, r in zip(assets, results, strict=True) if _finish(a, r, token, worker)]
    pages_complete(asset_ids=finished)
    return finished


async def _download_all(assets: list[MediaAsset], limits: FetchLimits, tmp_dir: str) -> list[Download]:
    async def one(asset):
        client = runner.client(allow_private=allows_private(asset.project))
        headers = {"User-Agent": user_agent_of(asset.project)}
        return await download(client, asset.url, headers=headers, limits=limits, tmp_dir=tmp_dir)

    gate = asyncio.Semaphore(4)

    async def gated(asset):
        async with gate:
            return await one(asset)

    return await asyncio.gather(*(gated(a) for a in assets))


def _finish(asset: MediaAsset, result: Download, token, worker: str) -> bool:
    """Store the bytes, then write the row by CAS; the temp file is always removed."""
    try:
        changes = _outcome(asset, result)
    except Exception as exc:
        log.warning("storing asset %s failed: %r", asset.id, exc)
        changes = _retry_or_fail(asset, "storage_error", repr(exc)[:2000])
    finally:
        result.discard()
    changes |= {"lease_token": None, "lease_expires_at": None, "downloaded_by": worker, "updated_at": timezone.now()}
    updated = MediaAsset.objects.filter(id=asset.id, lease_token=token, state=MediaAsset.State.LEASED).update(**changes)
    return updated == 1 and changes["state"] in (MediaAsset.State.DONE, MediaAsset.State.FAILED)


def _outcome(asset: MediaAsset, result: Download) -> dict:
    base = {
        "status_code": result.status_code,
        "error_code": result.error_code,
        "error_message": result.error_message[:2000],
    }
    if result.error_code:
        return base | _retry_or_fail(asset, result.error_code, result.error_message[:2000])
    key = store_file(result.path, sha256=result.sha256, size=result.size)
    return base | {
        "state": MediaAsset.State.DONE,
        "sha256": result.sha256,
        "size": result.size,
        "mime": result.mime[:200],
        "storage_key": key,
        "downloaded_at": timezone.now(),
    }


def _retry_or_fail(asset: MediaAsset, code: str, message: str) -> dict:
    changes = {"error_code": code, "error_message": message}
    if (is_transient(code) or code == "storage_error") and asset.attempts < settings.CRAWL_MAX_ATTEMPTS:
        delay = settings.CRAWL_RETRY_BASE_SECONDS * 2 ** max(0, asset.attempts - 1)
        return changes | {
            "state": MediaAsset.State.QUEUED,
            "enqueued_at": None,
            "next_fetch_at": timezone.now() + timedelta(seconds=min(3600, delay)),
        }
    return changes | {"state": MediaAsset.State.FAILED}


def pages_complete(*, asset_ids: list[int] | None = None, project_id: int | None = None) -> int:
    """Mark `extracted` pages done once none of their assets is pending (the page's last stage)."""
    pending = PageAsset.objects.filter(page=OuterRef("pk"), asset__state__in=PENDING)
    pages = Page.objects.filter(state=Page.State.EXTRACTED).exclude(Exists(pending))
    if asset_ids is not None:
        pages = pages.filter(id__in=PageAsset.objects.filter(asset_id__in=asset_ids).values("page_id"))
    if project_id is not None:
        pages = pages.filter(project_id=project_id)
    with transaction.atomic():
        return pages.update(state=Page.State.DONE, updated_at=timezone.now())
