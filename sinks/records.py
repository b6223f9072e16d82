"""The records sinks receive, built from what a stage just stored, each with its stable key: the
same item (page, kind, position) with the same data always has the same key, and a changed one a new
key; a page record's key names the page's version (a new one for every change, a revert to earlier
text included). So a sink gets every change once and a redelivery never twice."""

from .delivery import content_hash, record_key, sinks_active, sinks_offer


def results_offer(sender, *, results, clean=lambda value: value, **kwargs) -> int:
    """Offer the items and page records of extracted pages (crawl.results.pages_extracted, sent by
    the extract stage in its transaction; `sender` is the project);
    `clean` makes values storable (the extract stage's JSONB sanitiser). Nothing is built for a
    project without sinks."""
    project = sender
    sinks = sinks_active(project.id)
    if not sinks:
        return 0
    records = []
    for result in results:
        if result.failed:
            continue
        page = result.page
        for item in result.items:
            data = clean({"data": item.data, "errors": item.errors})
            records.append(
                {
                    "key": record_key(page.url_key[:24], item.kind, item.position, content_hash(data)),
                    "type": "item",
                    "project": project.slug,
                    "url": page.url,
                    "kind": item.kind,
                    "position": item.position,
                    "rule_version": item.version,
                    **data,
                }
            )
        fields = {name: result.changes.get(name, getattr(page, name)) for name in ("title", "text_hash")}
        version = page_version(page, result.changes)
        content = fields["text_hash"][:12] or content_hash(fields)
        records.append(
            {
                "key": record_key(page.url_key[:24], "page", content, f"v{version}"),
                "type": "page",
                "project": project.slug,
                "version": version,
                "url": page.url,
                "final_url": page.final_url,
                "status_code": page.status_code,
                "content_type": page.content_type,
                "title": clean(fields["title"]),
                "fetched_at": page.fetched_at.isoformat() if page.fetched_at else None,
            }
        )
    return sinks_offer(project.id, records, sinks=sinks)


def page_version(page, changes: dict) -> int:
    """The page's version after this extraction: its count of real changes, plus this one when its
    text changed now (the extract stage counts it in the same write). Every new version has a new
    number, a revert to earlier text included (A, B, A again is 1, 2, 3), so its record has a new
    key; extracting the same version again gives the same number."""
    changed = "text_hash" in changes and changes["text_hash"] != page.text_hash
    return page.change_count + int(changed)


def assets_offer(sender, *, assets, **kwargs) -> int:
    """Offer stored media assets (crawl.results.assets_stored, sent by the download stage when they
    are done; `sender` is the project's id)."""
    project_id = sender
    records = [
        {
            "key": record_key("asset", asset.sha256 or content_hash(asset.url), content_hash(asset.url)),
            "type": "asset",
            "url": asset.url,
            "kind": asset.kind,
            "sha256": asset.sha256,
            "size": asset.size,
            "mime": asset.mime,
            "storage_key": asset.storage_key,
        }
        for asset in assets
    ]
    return sinks_offer(project_id, records)
