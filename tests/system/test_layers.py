"""Imports flow one way: core <- crawl <- {scrape, media, sinks} <- console, with process plumbing in
crawlproject (below crawl; its URLconf names the apps' URLconfs by string), the benchmark's library
beside the console, and the Python API (crawlhub) on top."""

import ast
from pathlib import Path

from tests.conftest import BASE_DIR

# What each package may import of ours (besides itself).
ALLOWED = {
    "core": set(),
    "crawlproject": {"core"},
    "crawl": {"core", "crawlproject"},
    "scrape": {"core", "crawlproject", "crawl"},
    "media": {"core", "crawlproject", "crawl"},
    "sinks": {"core", "crawlproject", "crawl"},
    "bench": {"core", "crawlproject", "crawl", "scrape", "media", "sinks"},  # the benchmark's library
    "console": {"core", "crawlproject", "crawl", "scrape", "media", "sinks", "bench"},
    "crawlhub": {"core", "crawlproject", "crawl", "scrape", "media", "sinks", "console"},  # the Python API
}
OURS = set(ALLOWED) | {"tests"}


def imported_modules(path: Path, root: Path = BASE_DIR) -> set[str]:
    """Every module a file imports, at load time or inside a function, absolute or relative."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            names |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return names


def layer_offences(root: Path = BASE_DIR) -> list[str]:
    offences = []
    for package, allowed in ALLOWED.items():
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for module in sorted(imported_modules(path, root)):
                top = module.split(".")[0]
                if top in OURS and top != package and top not in allowed:
                    offences.append(f"{path.relative_to(root)}: {module}")
    return offences


def test_imports_flow_one_way():
    assert layer_offences() == []


def test_a_bad_import_is_caught(tmp_path):
    for package in ALLOWED:
        (tmp_path / package).mkdir()
    (tmp_path / "crawl" / "frontier.py").write_text("from media.services import assets_link_many\n")
    (tmp_path / "core" / "net.py").write_text("def f():\n    from crawl.models import Page\n")
    (tmp_path / "media" / "services.py").write_text("from sinks.records import assets_offer\n")
    (tmp_path / "scrape" / "fine.py").write_text("from crawl.models import Page\nfrom . import rules\n")
    assert layer_offences(tmp_path) == [
        "core/net.py: crawl.models",
        "core/net.py: crawl.models.Page",
        "crawl/frontier.py: media.services",
        "crawl/frontier.py: media.services.assets_link_many",
        "media/services.py: sinks.records",
        "media/services.py: sinks.records.assets_offer",
    ]


def test_the_console_reads_the_pipeline_it_sits_on():
    assert imported_modules(BASE_DIR / "console" / "jobreads.py") >= {"crawl.models", "scrape.models"}
