"""Thin Celery task of the download stage."""

from celery import shared_task

from crawlproject.queues import DOWNLOAD, STAGES

from .services import assets_download


@shared_task(name=STAGES[DOWNLOAD].task, bind=True, **STAGES[DOWNLOAD].limits())
def download_batch(self, asset_ids: list[int], job: int | None = None, wake: str | None = None) -> int:
    """`asset_ids` empty: a wake-up (booked for the time `wake`), which claims what is ready."""
    return len(assets_download(asset_ids=asset_ids, worker=self.request.hostname or "", wake=wake))
