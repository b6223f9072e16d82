"""Stored data: exports (JSON lines, CSV, tar of assets, WARC) and how long rows are kept (retention)."""
