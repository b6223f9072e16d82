"""Spiders of the per-request control tests (tests/scrape/test_request_control_spiders.py), listed in
CRAWL_SPIDER_MODULES of their workers.

- `req-orders` follows the orders its site gives: a page's <script id="orders"> lists requests in
  JSON, each with the fields a Request takes (proxy, render, timeout, retries, not_before,
  priority...), and its links are followed as they are;
- `req-partner` crawls a partner API that wants every request signed: start() makes the first
  requests (the API's URL comes from PARTNER_URL_ENV), sign() adds a timestamp and an HMAC over
  method, path and timestamp, and each answer names its next page.
"""

import hashlib
import hmac
import json
import os
import time
from urllib.parse import urlsplit

from scrape.spiders import Request, Spider, register

PARTNER_URL_ENV = "CRAWLHUB_TEST_PARTNER_URL"
PARTNER_SECRET = b"partner-secret"


def partner_signature(method: str, path: str, timestamp: str) -> str:
    """The HMAC the partner API checks: SHA-256 over method, path (with its query) and timestamp."""
    return hmac.new(PARTNER_SECRET, f"{method}\n{path}\n{timestamp}".encode(), hashlib.sha256).hexdigest()


@register
class OrdersSpider(Spider):
    name = "req-orders"

    def default(self, response):
        orders = response.xpath("string(//script[@id='orders'])")
        for order in json.loads(orders)["requests"] if orders else []:
            yield Request(**order)
        for href in response.xpath("//a/@href"):
            yield Request(href)
        yield {"url": response.url, "links": len(response.xpath("//a"))}


@register
class PartnerSpider(Spider):
    name = "req-partner"

    def start(self):
        base = os.environ[PARTNER_URL_ENV]
        yield Request(f"{base}/api/items?page=1", route="items")
        yield Request(f"{base}/api/news", route="items", method="POST", json={"since": 1})

    def items(self, response):
        answer = response.json()
        yield from answer["items"]
        if answer.get("next"):
            yield Request(response.urljoin(answer["next"]), route="items")

    def sign(self, request):
        path = urlsplit(request.url)
        target = path.path + (f"?{path.query}" if path.query else "")
        stamp = f"{time.time():.3f}"
        request.headers["X-Timestamp"] = stamp
        request.headers["X-Signature"] = partner_signature(request.method, target, stamp)
        return request
