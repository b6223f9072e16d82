"""The download stage and asset bookkeeping: link assets to pages, claim, download, store, finish."""

import logging
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from crawl.db import insert_new
from crawl.fetcher import is_transient
from crawl.models import Page, Project
from crawl.services.frontier import project_scope
from crawl.urls import InvalidURL, canonicalize, host_in_domains, host_of, url_key

from .downloader import Download
from .downloading import Fetched, clean_stale_temp, download_assets, project_media_rules
from .models import MediaAsset, PageAsset
from .storage import StorageUnavailable, store_file

log = logging.getLogger("crawlhub.media")
PENDING = (MediaAsset.State.QUEUED, MediaAsset.State.LEASED)
RETRYABLE = ("storage_error",)


def assets_link_many(*, project: Project, refs_by_page: dict[int, list[tuple[str, str]]]) -> tuple[list[int], set]:
    """Record pages' media: one asset row per URL, one link row per page and asset.

    Returns the ids of assets new to the project and the ids of pages with an asset still pending.
    Inserts go in key order so concurrent batches take index locks in the same order.
    """
    assets, keys_by_page = _wanted_assets(project, refs_by_page)
    if not assets:
        return [], set()
    new_ids = insert_new(MediaAsset, [assets[k] for k in sorted(assets)], conflict_fields=("project", "url_key"))
    rows = MediaAsset.objects.filter(project=project, url_key__in=assets.keys()).values_list("url_key", "id", "state")
    known = {key: (asset_id, state) for key, asset_id, state in rows}
    links = sorted((pid, known[k][0]) for pid, keys in keys_by_page.items() for k in keys)
    PageAsset.objects.bulk_create([PageAsset(page_id=p, asset_id=a) for p, a in links], ignore_conflicts=True)
    pending = {pid for pid, keys in keys_by_page.items() if any(known[k][1] in PENDING for k in keys)}
    return new_ids, pending


def _wanted_assets(project, refs_by_page) -> tuple[dict[str, MediaAsset], dict[int, set[str]]]:
    rules, domains = project_media_rules(project), project_scope(project).domains
    assets: dict[str, MediaAsset] = {}
    keys_by_page: dict[int, set[str]] = {}
    now = timezone.now()
    for page_id, refs in refs_by_page.items():
        for raw, kind in refs:
            try:
                canonical = canonicalize(raw)
            except InvalidURL:
                continue
            explicit = kind == "download"  # an ID scraper's job: the project's own rule asked for it
            offsite = domains and not host_in_domains(host_of(canonical), domains)
            if not explicit and ((offsite and not rules.any_host) or not rules.wants(canonical, kind)):
                continue
            kind = "file" if explicit else kind
            key = url_key(canonical)
            downloader = rules.downloader_for(canonical)
            assets.setdefault(
                key,
                MediaAsset(
                    project=project, url=canonical, url_key=key, kind=kind, downloader=downloader, enqueued_at=now
                ),
            )
            keys_by_page.setdefault(page_id, set()).add(key)
    return assets, keys_by_page


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
    """Download the claimable assets among asset_ids into storage; return the ids finished.

    Bytes go to a temp file, then to storage under their sha256, and only then is the row marked
    done (by CAS on the lease), so there is never a row without its object or a partial object.
    """
    token, assets = assets_claim(asset_ids)
    if not assets:
        return []
    clean_stale_temp(older_than=settings.CRAWL_LEASE_SECONDS)
    finished = [f.asset.id for f in download_assets(assets) if _finish(f, token, worker)]
    pages_complete(asset_ids=finished)
    return finished


def _finish(fetched: Fetched, token, worker: str) -> bool:
    """Store the bytes, then write the row by CAS; temp files are always removed."""
    asset = fetched.asset
    try:
        changes = _outcome(asset, fetched.files)
    except StorageUnavailable as exc:  # storage down: retry later, nothing partial was kept
        log.warning("storing asset %s failed: %r", asset.id, exc)
        changes = _retry_or_fail(asset, "storage_error", repr(exc)[:2000])
    except Exception as exc:
        log.exception("storing asset %s failed", asset.id)
        changes = {"state": MediaAsset.State.FAILED, "error_code": "store_failed", "error_message": repr(exc)[:2000]}
    finally:
        for result in fetched.files:
            result.discard()
    changes |= {"lease_token": None, "lease_expires_at": None, "downloaded_by": worker, "updated_at": timezone.now()}
    mine = MediaAsset.objects.filter(id=asset.id, lease_token=token, state=MediaAsset.State.LEASED)
    return mine.update(**changes) == 1 and changes["state"] in (MediaAsset.State.DONE, MediaAsset.State.FAILED)


def _outcome(asset: MediaAsset, files: list[Download]) -> dict:
    if asset.downloader == "gallerydl":
        return _gallery_outcome(asset, files)
    result = files[0]
    base = {"status_code": result.status_code, "error_code": result.error_code, "error_message": result.error_message}
    if result.error_code:
        return base | _retry_or_fail(asset, result.error_code, result.error_message[:2000])
    return base | _stored(result)


def _stored(result: Download) -> dict:
    key = store_file(result.path, sha256=result.sha256, size=result.size)
    return {
        "state": MediaAsset.State.DONE,
        "sha256": result.sha256,
        "size": result.size,
        "mime": result.mime[:200],
        "storage_key": key,
        "metadata": result.metadata,
        "downloaded_at": timezone.now(),
    }


def _gallery_outcome(asset: MediaAsset, files: list[Download]) -> dict:
    """A gallery becomes one done asset per file (url `<gallery>#<n>`), linked to the gallery's pages."""
    good = [f for f in files if not f.error_code]
    if not good:
        first = files[0] if files else Download(url=asset.url, error_code="empty_gallery", error_message="no files")
        return _retry_or_fail(asset, first.error_code, first.error_message[:2000])
    items = []
    for n, result in enumerate(good):
        item_url = f"{asset.url}#{n}"
        row = MediaAsset(
            project_id=asset.project_id,
            url=item_url,
            url_key=url_key(item_url),
            kind="image",
            downloader="gallerydl",
            **_stored(result),
        )
        items += insert_new(MediaAsset, [row], conflict_fields=("project", "url_key"))
    page_ids = PageAsset.objects.filter(asset=asset).values_list("page_id", flat=True)
    PageAsset.objects.bulk_create(
        [PageAsset(page_id=p, asset_id=a) for p in page_ids for a in items], ignore_conflicts=True
    )
    skipped = len(files) - len(good)
    return {
        "state": MediaAsset.State.DONE,
        "metadata": {"items": len(good), "skipped": skipped},
        "downloaded_at": timezone.now(),
        "error_code": "",
        "error_message": "",
    }


def _retry_or_fail(asset: MediaAsset, code: str, message: str) -> dict:
    changes = {"error_code": code, "error_message": message}
    retryable = is_transient(code) or code in RETRYABLE
    if retryable and asset.attempts < settings.CRAWL_MAX_ATTEMPTS:
        delay = settings.CRAWL_RETRY_BASE_SECONDS * 2 ** max(0, asset.attempts - 1)
        retry_at = timezone.now() + timedelta(seconds=min(3600, delay))
        return changes | {"state": MediaAsset.State.QUEUED, "enqueued_at": None, "next_fetch_at": retry_at}
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
