"""A webhook receiver for the HTTP sink's tests: a real HTTP server on loopback that checks every
request's signature, keeps each record once by its key (as a receiver is told to), logs every key it
was handed, and refuses with a 500 while its switch says so (`refusing`, or `refuse_for(seconds)`:
from its first refusal on, then it switches itself back)."""

import json
import threading
import time

from sinks.signing import signature_valid
from tests.servers import Site, SiteServer

JSON = {"Content-Type": "application/json"}


class WebhookReceiver:
    def __init__(self, secret: str):
        self.secret = secret
        self.refusing = False
        self.refuse_seconds, self.first_refusal = 0.0, None
        self.records: dict[str, dict] = {}  # key -> the record, kept once
        self.handed: list[str] = []  # every key of every accepted request, repeats included
        self.batches: list[str] = []
        self.bad_signatures = self.refused = self.accepted = 0
        self._lock = threading.Lock()
        self.server = SiteServer(Site(files={"/hook": self._answer}))
        self.url = f"{self.server.url}/hook"

    def refuse_for(self, seconds: float) -> None:
        self.refusing, self.refuse_seconds = True, seconds

    def _still_refusing(self) -> bool:
        if self.refusing and self.refuse_seconds:
            self.first_refusal = self.first_refusal or time.monotonic()
            self.refusing = time.monotonic() - self.first_refusal < self.refuse_seconds
        return self.refusing

    def __enter__(self):
        self.server.__enter__()
        return self

    def __exit__(self, *exc):
        self.server.__exit__(*exc)

    def _answer(self, request):
        if request.method != "POST":
            return 405, JSON, b"{}"
        with self._lock:
            if not signature_valid(self.secret, request.headers, request.body):
                self.bad_signatures += 1
                return 401, JSON, b'{"error": "bad signature"}'
            if self._still_refusing():
                self.refused += 1
                return 500, JSON, b'{"error": "the receiver is down"}'
            envelope = json.loads(request.body)
            self.accepted += 1
            self.batches.append(envelope["batch"])
            for record in envelope["records"]:
                self.handed.append(record["key"])
                self.records.setdefault(record["key"], record)
        return 200, JSON, b'{"ok": true}'
