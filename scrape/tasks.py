"""Thin Celery task of the extract stage."""

from celery import shared_task

from crawl import pipeline

from .services import pages_extract


@shared_task(name="scrape.extract_batch", bind=True, soft_time_limit=170, time_limit=180)
def extract_batch(self, page_ids: list[int]) -> int:
    outcome = pages_extract(page_ids=page_ids, worker=self.request.hostname or "")
    pipeline.publish_fetch(outcome.new_page_ids, outcome.hosts, rendered=outcome.rendered)
    pipeline.publish_download(outcome.new_asset_ids)
    return len(outcome.new_page_ids)
