"""The HTTP sink (a webhook on results): each batch is one signed JSON POST to the receiver's URL,
through the egress gate (core/net/egress.py), so it reaches exactly the addresses the project's fetches
may reach. Any answer but a 2xx is a refusal: the batch is retried with back-off (delivery.py) and
the sink shows the answer's status as its last error, with the URL masked (core/masking.py: its
password, path and query) and without the receiver's reply, which may echo what it was sent.

The body: {"project": slug, "sink": name, "batch": name, "records": [record, ...]}. Every record
has its stable "key": a batch delivered again after a crash has the same batch name and the same
keys, so a receiver keeps a record once by its key. The signature is in signing.py."""

import json
from urllib.parse import urlsplit

import httpx
from django.core.exceptions import ValidationError

from core.masking import masked_webhook_url
from core.net.egress import EGRESS_HEADER, egress_url
from crawl.policy import allows_private

from .signing import MIN_SECRET_LENGTH, signed_headers

CONFIG_KEYS = {"url", "secret", "timeout"}
DEFAULT_TIMEOUT = 30.0
BATCH_HEADER = "X-Crawlhub-Batch"


class ReceiverRefused(Exception):
    """The receiver (or the egress gate in its place) answered something other than a 2xx."""


class HttpSink:
    def __init__(self, sink):
        self.sink = sink
        self.url, self.secret = sink.config["url"], sink.config["secret"]
        self.timeout = float(sink.config.get("timeout", DEFAULT_TIMEOUT))

    def deliver(self, records: list[dict], *, batch: str) -> None:
        project = self.sink.project
        envelope = {"project": project.slug, "sink": self.sink.name, "batch": batch, "records": records}
        body = json.dumps(envelope, ensure_ascii=False, sort_keys=True).encode()
        headers = {"Content-Type": "application/json", BATCH_HEADER: batch, **signed_headers(self.secret, body)}
        gate = egress_url(allow_private=allows_private(project), upstream=project.proxy)
        with httpx.Client(proxy=gate, trust_env=False, follow_redirects=False, timeout=self.timeout) as client:
            answer = client.post(self.url, content=body, headers=headers)
        if EGRESS_HEADER in answer.headers:
            raise ReceiverRefused(f"not sent: {answer.reason_phrase}")
        if not answer.is_success:
            status = f"{answer.status_code} {answer.reason_phrase}".strip()
            raise ReceiverRefused(f"HTTP {status} from {masked_webhook_url(self.url)}")


def http_check(config: dict) -> None:
    """The URL is http(s) with a host, the secret long enough, the timeout a positive number."""
    parts = urlsplit(str(config.get("url", "")))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError("url: an http:// or https:// URL with a host")
    if len(str(config.get("secret", ""))) < MIN_SECRET_LENGTH:
        raise ValidationError(
            f"secret: at least {MIN_SECRET_LENGTH} characters, shared with the receiver "
            '(python -c "import secrets; print(secrets.token_hex(32))")'
        )
    timeout = config.get("timeout", DEFAULT_TIMEOUT)
    if type(timeout) not in (int, float) or not 0 < timeout <= 100:
        raise ValidationError("timeout: seconds, more than 0 and at most 100")
