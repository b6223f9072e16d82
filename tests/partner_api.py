"""A partner API on loopback that answers only requests signed with a fresh HMAC over method, path
and timestamp (tests/request_spiders.py's partner_signature), and keeps what it accepted and
refused: the sign() hook's tests, in the crawl and in the debugger, use it."""

import json
import time

from tests.request_spiders import partner_signature
from tests.servers import Request, Site, SiteServer

JSON = {"Content-Type": "application/json"}


class PartnerApi:
    def __init__(self, pages: dict[str, object], *, refusal: bytes = b'{"error": "bad signature"}'):
        self.pages, self.refusal = pages, refusal
        self.refused: list[str] = []
        self.accepted: list[tuple[str, str]] = []
        self.server = SiteServer(Site(default=self.answer))

    def answer(self, request: Request) -> tuple:
        stamp, signature = request.headers.get("X-Timestamp", ""), request.headers.get("X-Signature", "")
        fresh = stamp and abs(time.time() - float(stamp)) < 30
        if not fresh or signature != partner_signature(request.method, request.path, stamp):
            self.refused.append(f"{request.method} {request.path}")
            return 401, JSON, self.refusal
        self.accepted.append((request.method, request.path))
        return 200, JSON, json.dumps(self.pages.get(request.path, self.pages.get("*", {}))).encode()
