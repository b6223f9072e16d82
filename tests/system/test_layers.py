"""The pipeline (crawl, scrape, media) never imports the console that sits above it."""

import ast
from pathlib import Path

from tests.conftest import BASE_DIR

PIPELINE = ("crawl", "scrape", "media")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_no_pipeline_module_imports_the_console():
    offenders = []
    for app in PIPELINE:
        for path in sorted((BASE_DIR / app).rglob("*.py")):
            bad = sorted(m for m in imported_modules(path) if m == "console" or m.startswith("console."))
            offenders += [f"{path.relative_to(BASE_DIR)}: {m}" for m in bad]
    assert offenders == []
    assert imported_modules(BASE_DIR / "console" / "jobreads.py") >= {"crawl.models", "media.models", "scrape.models"}
