"""Imports flow one way: core <- crawlproject <- crawl <- {fetch, scrape, media, sinks} <- console <-
crawlhub, with process plumbing in crawlproject (below crawl; its URLconf names the apps' URLconfs by
string) and the benchmark's library beside the console. The stages do not import one another, and no
package has an import circle among its own modules."""

import ast
from pathlib import Path

from tests.conftest import BASE_DIR

# What each package may import of ours (besides itself).
ALLOWED = {
    "core": set(),
    "crawlproject": {"core"},
    "crawl": {"core", "crawlproject"},
    "fetch": {"core", "crawlproject", "crawl"},
    "scrape": {"core", "crawlproject", "crawl"},
    "media": {"core", "crawlproject", "crawl"},
    "sinks": {"core", "crawlproject", "crawl"},
    "bench": {"core", "crawlproject", "crawl", "fetch", "scrape", "media", "sinks"},  # the benchmark's library
    "console": {"core", "crawlproject", "crawl", "fetch", "scrape", "media", "sinks", "bench"},
    "crawlhub": {"core", "crawlproject", "crawl", "fetch", "scrape", "media", "sinks", "console"},  # the Python API
}
OURS = set(ALLOWED) | {"tests"}
STAGES = ("fetch", "scrape", "media", "sinks")  # peers: each hands the next its ids through crawl's frontier

# Circles among a package's own modules that are kept, each with its reason (reviewed: none needed today).
EXCEPTIONS: dict[frozenset[str], str] = {}


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


def stage_crossings(root: Path = BASE_DIR) -> list[str]:
    """Every import of one stage by another, at load time or inside a function."""
    crossings = []
    for stage in STAGES:
        for path in _modules_of(root, stage):
            others = [m for m in sorted(imported_modules(path, root)) if m.split(".")[0] in set(STAGES) - {stage}]
            crossings += [f"{path.relative_to(root)}: {module}" for module in others]
    return crossings


def import_circles(root: Path = BASE_DIR) -> list[list[str]]:
    """Each set of a package's modules that import one another round a circle (strongly connected
    components of the package's import graph), sorted."""
    circles = []
    for package in ALLOWED:
        graph = _package_graph(root, package)
        circles += [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]
    return sorted(circles)


def _modules_of(root: Path, package: str) -> list[Path]:
    return [path for path in sorted((root / package).rglob("*.py")) if "migrations" not in path.parts]


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports. A name is the longest module it starts with; a bare
    package name beside names under it ("from . import rules" names both) stands for those names only."""
    files = {_module_name(path, root): path for path in _modules_of(root, package)}
    graph = {}
    for module, path in files.items():
        names = imported_modules(path, root)
        names = {n for n in names if not any(other.startswith(n + ".") for other in names)}
        graph[module] = {target for n in names if (target := _longest_module(n, files)) not in (None, module)}
    return graph


def _longest_module(name: str, modules) -> str | None:
    parts = name.split(".")
    return next((".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in modules), None)


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, without recursion."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                found.append(component)
    return found


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


def test_a_bad_import_of_a_stage_app_is_caught(tmp_path):
    for package in ALLOWED:
        (tmp_path / package).mkdir()
    (tmp_path / "fetch" / "round.py").write_text("from console.jobs import jobs_tick\nfrom crawl.models import Page\n")
    (tmp_path / "crawl" / "frontier.py").write_text("def f():\n    from fetch.round import pages_fetch\n")
    assert layer_offences(tmp_path) == [
        "crawl/frontier.py: fetch.round",
        "crawl/frontier.py: fetch.round.pages_fetch",
        "fetch/round.py: console.jobs",
        "fetch/round.py: console.jobs.jobs_tick",
    ]


def test_stages_do_not_import_one_another():
    assert stage_crossings() == []


def test_a_stage_importing_another_is_caught(tmp_path):
    for package in ALLOWED:
        (tmp_path / package).mkdir()
    (tmp_path / "scrape" / "stage.py").write_text("def f():\n    from fetch.rendering import render_request\n")
    (tmp_path / "media" / "transfers.py").write_text("from fetch import round\nfrom crawl.models import Page\n")
    (tmp_path / "sinks" / "kinds.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import media\n"
    )
    assert stage_crossings(tmp_path) == [
        "scrape/stage.py: fetch.rendering",
        "scrape/stage.py: fetch.rendering.render_request",
        "media/transfers.py: fetch",
        "media/transfers.py: fetch.round",
        "sinks/kinds.py: media",
    ]


def test_no_package_has_an_import_circle():
    circles = {frozenset(circle) for circle in import_circles()}
    assert circles - set(EXCEPTIONS) == set()


def test_each_kept_circle_is_still_there():
    """A circle that was broken leaves the list of exceptions."""
    circles = {frozenset(circle) for circle in import_circles()}
    assert set(EXCEPTIONS) - circles == set()


def test_an_import_circle_is_caught(tmp_path):
    for package in ALLOWED:
        (tmp_path / package).mkdir()
    (tmp_path / "crawl" / "__init__.py").write_text("")
    (tmp_path / "crawl" / "a.py").write_text("from crawl.b import g\n")
    (tmp_path / "crawl" / "b.py").write_text("def g():\n    from . import a\n")  # inside a function: still a circle
    (tmp_path / "crawl" / "c.py").write_text("from . import a\n")  # imports the circle, is not in it
    (tmp_path / "core" / "net").mkdir()
    (tmp_path / "core" / "net" / "__init__.py").write_text("from .client import fetch\n")
    (tmp_path / "core" / "net" / "client.py").write_text("from core.net import transport\n")
    (tmp_path / "core" / "net" / "transport.py").write_text("from core.net.client import fetch\n")
    (tmp_path / "console" / "models.py").write_text("from console import health_models\n")
    (tmp_path / "console" / "health_models.py").write_text("from console.notify import check\n")
    (tmp_path / "console" / "notify.py").write_text("def check():\n    from console.models import Job\n")
    assert import_circles(tmp_path) == [
        ["console.health_models", "console.models", "console.notify"],
        ["core.net.client", "core.net.transport"],
        ["crawl.a", "crawl.b"],
    ]


def test_the_console_reads_the_pipeline_it_sits_on():
    assert imported_modules(BASE_DIR / "console" / "runs" / "jobreads.py") >= {"crawl.models", "scrape.models"}
