"""The media app's models are declared in crawl/models/assets.py (the frontier owns them)."""

from crawl.models.assets import MediaAsset, PageAsset

__all__ = ["MediaAsset", "PageAsset"]
