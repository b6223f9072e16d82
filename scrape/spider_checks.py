"""Checks: stored responses with the items a spider must make of them, run offline (no network),
as `manage.py spider check` and every deploy do. A check is a dict of url, status, headers, body
(bytes), request (as a page row keeps it) and expected_items: read from a SpiderCheck row
(scrape/spider_versions.py) or from a JSON file, for checks kept in a repository.

Pure: no Django.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .spiders import Request, RequestError, Response, Spider, run_spider

MAX_SHOWN = 20  # differences shown per check


@dataclass
class CheckResult:
    name: str
    differences: list[str] = field(default_factory=list)
    items: list[dict] = field(default_factory=list)  # what the spider made

    @property
    def passed(self) -> bool:
        return not self.differences


def check_failures(results: list[CheckResult]) -> list[str]:
    """One line per failing check: its name and its first difference."""
    return [f"{r.name}: {r.differences[0]}" for r in results if not r.passed]


def checks_from_dir(path: Path) -> list[dict]:
    """The checks kept as JSON files in a folder (their name: the file's, without .json)."""
    checks = []
    for file in sorted(Path(path).glob("*.json")):
        data = json.loads(file.read_text())
        body = data.get("body", "")
        checks.append({**data, "name": data.get("name") or file.stem, "body": body.encode()})
    return checks


def check_run(spider: Spider, check: dict) -> CheckResult:
    """What the spider makes of the check's response, compared with the items expected."""
    try:
        request = Request.from_page_request(check["url"], check.get("request") or {})
    except RequestError as exc:
        return CheckResult(check["name"], [f"the stored request cannot be made: {exc}"])
    response = Response(
        url=check["url"],
        status=check.get("status") or 200,
        headers=dict(check.get("headers") or {}),
        body=bytes(check.get("body") or b""),
        request=request,
    )
    result = run_spider(spider, response)
    if result.error:
        return CheckResult(check["name"], [result.error], [])
    items = as_json(result.items)
    return CheckResult(check["name"], items_differences(check.get("expected_items") or [], items), items)


def items_differences(expected: list[dict], got: list[dict]) -> list[str]:
    """What differs between two lists of items, item by item and field by field."""
    differences = []
    for index in range(max(len(expected), len(got))):
        if index >= len(got):
            differences.append(f"item {index} is missing: expected {_short(expected[index])}")
        elif index >= len(expected):
            differences.append(f"item {index} is extra: {_short(got[index])}")
        else:
            differences += _fields_differences(index, expected[index], got[index])
    if len(differences) > MAX_SHOWN:
        differences = [*differences[:MAX_SHOWN], f"... and {len(differences) - MAX_SHOWN} more"]
    return differences


def _fields_differences(index: int, expected: Any, got: Any) -> list[str]:
    if not (isinstance(expected, dict) and isinstance(got, dict)):
        return [] if expected == got else [f"item {index}: expected {_short(expected)}, got {_short(got)}"]
    return [
        f"item {index}: {key}: expected {_short(expected.get(key))}, got {_short(got.get(key))}"
        for key in sorted(expected.keys() | got.keys(), key=str)
        if expected.get(key) != got.get(key) or (key in expected) != (key in got)
    ]


def as_json(value: Any) -> Any:
    """Items as JSON keeps them (tuples become lists, other objects their str), for comparison."""
    return json.loads(json.dumps(value, default=str, allow_nan=True))


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
