"""Write tests/durations.json, the seconds each test file took, from a run's JUnit XML report:

    make test PYTEST_ARGS=--junitxml=var/junit.xml && .venv/bin/python -m tests.durations var/junit.xml

`make test` starts the longest files first (tests/conftest.py): with one file per process at a
time, a long file handed out last would run alone at the end while the other process waits.
"""

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).with_name("durations.json")
SHORTEST_KEPT_SECONDS = 1.0  # shorter files are not recorded: they count as short anyway


def file_of(classname: str) -> str | None:
    """tests.crawl.test_x.TestY -> tests/crawl/test_x.py (the longest prefix that is a file)."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = Path(*parts[:end]).with_suffix(".py")
        if (ROOT / path).is_file():
            return path.as_posix()
    return None


def durations(report: Path) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).iter("testcase"):
        path = file_of(case.get("classname", ""))
        if path:
            seconds[path] += float(case.get("time") or 0)
    kept = {path: round(s, 1) for path, s in seconds.items() if s >= SHORTEST_KEPT_SECONDS}
    return dict(sorted(kept.items(), key=lambda item: -item[1]))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    recorded = durations(Path(argv[0]))
    OUT.write_text(json.dumps(recorded, indent=1) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(recorded)} files, {sum(recorded.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
