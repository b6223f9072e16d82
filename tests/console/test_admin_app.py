"""The admin's modules load with the URLs, not at every process start (console.admin_app), and the
system checks still see every registration."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
import django
django.setup()
from django.contrib import admin
from django.core.checks import run_checks
at_start = len(admin.site._registry)
modules_at_start = sorted(m for m in sys.modules if m == "console.admin" or m.startswith("console.admin."))
errors = run_checks(tags=["admin"])
after_checks = len(admin.site._registry)
import crawlproject.urls  # noqa: F401
print(json.dumps({"at_start": at_start, "after_checks": after_checks,
                  "after_urls": len(admin.site._registry), "errors": [str(e) for e in errors],
                  "modules_at_start": modules_at_start}))
"""


def test_a_process_starts_without_the_admin_modules_and_the_checks_still_see_them():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "crawlproject.settings", "PYTHONPATH": str(REPO)}
    env.pop("DATABASE_URL", None)  # setting up and checking the admin needs no database
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=True
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["at_start"] == 0
    assert seen["after_checks"] == seen["after_urls"] > 10  # the checks loaded what the URLs load
    assert seen["errors"] == []
    assert seen["modules_at_start"] == []
