"""The answers that back a host off, and the error codes a page gets when its host backed off.
Imports nothing: the frontier reads them without loading the host policy."""

BACKOFF_STATUSES = (429, 503)  # the answers that back a host off
# A page's error codes when its host backed off: its answer's, or the batch's hold (core.net.client).
BACKOFF_CODES = (*(f"http_{status}" for status in BACKOFF_STATUSES), "host_backoff")
