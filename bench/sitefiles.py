"""A site directory in the shared bench's layout: site/ (the web root), ground_truth.json and
redirects.map beside it (outside the web root), plus urls.txt and our generation stamp."""

import json
import shutil
from pathlib import Path
from urllib.parse import urlsplit

from bench.sitegen import GENERATOR_VERSION, Site, site_files, site_plan
from bench.truth import ground_truth

STAMP = "generation.json"


def site_dir_name(*, n: int, seed: int, base_url: str) -> str:
    return f"n{n}-seed{seed}-port{urlsplit(base_url).port or 80}"


def site_ensure(*, n: int, seed: int, base_url: str, parent: Path) -> tuple[Path, bool]:
    """The generated site for these arguments under parent, reused when its stamp matches; (dir, reused)."""
    root = parent / site_dir_name(n=n, seed=seed, base_url=base_url)
    stamp = {"generator_version": GENERATOR_VERSION, "n": n, "seed": seed, "base_url": base_url.rstrip("/")}
    if _stamp_of(root) == stamp:
        return root, True
    site_write(site_plan(n=n, seed=seed, base_url=base_url), root, stamp)
    return root, False


def _stamp_of(root: Path) -> dict | None:
    try:
        return json.loads((root / STAMP).read_text())
    except (OSError, ValueError):
        return None


def site_write(site: Site, root: Path, stamp: dict) -> None:
    """Writes the site next to root, then swaps it in: a half-written site is never reused."""
    building = root.with_name(root.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    web = building / "site"
    for path, (status, _, body) in site_files(site).items():
        if status == 200:  # the redirects go to redirects.map
            _write(web / ("index.html" if path == "/" else path.lstrip("/")), body)
    truth = ground_truth(site)
    _write(building / "ground_truth.json", (json.dumps(truth, indent=1, sort_keys=True) + "\n").encode())
    _write(building / "redirects.map", "".join(f"{k} {v};\n" for k, v in sorted(site.redirects.items())).encode())
    _write(building / "urls.txt", "".join(f"{p}\n" for p in truth["pages"]).encode())
    _write(building / STAMP, (json.dumps(stamp, sort_keys=True) + "\n").encode())
    if root.exists():
        if _stamp_of(root) is None:
            raise FileExistsError(f"{root} exists and was not made by bench/sitegen.py: not replacing it")
        shutil.rmtree(root)
    building.rename(root)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def read_redirects(path: Path) -> dict[str, str]:
    """An nginx `map` include of `source target;` lines (the shared bench's redirects.map)."""
    redirects = {}
    for line in path.read_text().splitlines():
        parts = line.strip().rstrip(";").split()
        if len(parts) == 2:
            redirects[parts[0]] = parts[1]
    return redirects
