"""The fault suite's ledger, read from the crawl's own database and media storage.

Run as `python -m tests.faults.ledger_report PROJECT` with the environment the workers used
(DATABASE_URL, CRAWLHUB_VAR_DIR, ...), so the same check works on the test PostgreSQL, on a
scenario's private PostgreSQL and on the embedded SQLite. Prints one JSON object.
"""

import hashlib
import json
import os
import sys
from collections import Counter


def report(slug: str) -> dict:
    from django.db import connection

    from core.storage import list_keys, open_object
    from core.tempfiles import temp_dir
    from crawl.models import MediaAsset, Page, Project

    project = Project.objects.get(slug=slug)
    pages = list(
        Page.objects.filter(project=project).values(
            *("url", "url_key", "state", "status_code", "error_code", "error_message", "attempts"),
            *("final_url", "lease_token"),
        )
    )
    url_counts = Counter(p["url"] for p in pages)
    constraints = connection.introspection.get_constraints(connection.cursor(), Page._meta.db_table)
    unique = any(c["unique"] and c["columns"] == ["project_id", "url_key"] for c in constraints.values())

    assets = list(MediaAsset.objects.filter(project=project).values("id", "state", "sha256", "storage_key"))
    bad_bytes = []
    for asset in assets:
        if asset["state"] != "done":
            continue
        digest = hashlib.sha256()
        with open_object(asset["storage_key"]) as f:
            for chunk in iter(lambda f=f: f.read(1 << 20), b""):
                digest.update(chunk)
        if digest.hexdigest() != asset["sha256"]:
            bad_bytes.append(asset["storage_key"])
    referenced = set(MediaAsset.objects.exclude(storage_key="").values_list("storage_key", flat=True))
    orphans = sorted(set(list_keys()) - referenced)
    temp_files = sorted(str(p) for p in temp_dir().rglob("*") if p.is_file())

    return {
        "rows": len(pages),
        "by_state": dict(Counter(p["state"] for p in pages)),
        "duplicate_urls": sum(n - 1 for n in url_counts.values() if n > 1),
        "unique_constraint": unique,
        "leased_tokens_left": sum(1 for p in pages if p["lease_token"]),
        "pages": [{k: p[k] for k in ("url", "state", "status_code", "error_code", "final_url")} for p in pages],
        "assets": {
            "rows": len(assets),
            "by_state": dict(Counter(a["state"] for a in assets)),
            "bad_bytes": bad_bytes,
            "orphans": orphans,
            "temp_files": temp_files,
        },
    }


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crawlproject.settings")
    import django

    django.setup()
    json.dump(report(sys.argv[1]), sys.stdout)
