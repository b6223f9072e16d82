"""What an extract batch tells the health counters (crawl/health.py): pages extracted, new and
changed items, and for each rule set the pages it applied to, the items it made and how many of
them hold each watched field (the required ones, or every field when none is required); the same
for the project's Python spider, under the key "spider", watching every field its items have."""

from collections import Counter

from crawl.health import health_count
from scrape.extraction import PageResult, project_rule_sets

EMPTY = (None, "", [], {})
SPIDER = "spider"  # the item kind of a Python spider's items, and its key in the health counters


def extracted_count(project, results: list[PageResult], changed_page_ids: set[int]) -> None:
    """Count the written results of one project's batch; `changed_page_ids`: pages whose text changed."""
    counts: Counter = Counter()
    rule_sets = project_rule_sets(project)
    for result in results:
        if result.failed:
            continue
        counts[("project", "", "pages_extracted")] += 1
        ruled = [i for i in result.items if i.kind.startswith("rule:")]
        if not result.page.text_hash:
            counts[("project", "", "new_items")] += len(ruled)
        elif result.page.id in changed_page_ids:
            counts[("project", "", "changed_items")] += len(ruled)
        for rules in rule_sets:
            if rules.applies_to(result.page.url):
                counts.update(_rule_counts(rules, [i for i in ruled if i.kind == rules.kind]))
        if result.handler_log is not None:  # the project's Python spider parsed this page
            counts.update(_spider_counts([i for i in result.items if i.kind == SPIDER]))
    health_count(project.id, counts)


def _spider_counts(items) -> Counter:
    """A spider's pages, items and, for every field its items have, how many fill it: watched as a
    rule set's are, under the key "spider", so a changed template shows in the spider's fields too."""
    counts = Counter({("rules", SPIDER, "pages"): 1, ("rules", SPIDER, "items"): len(items)})
    for name in {name for item in items for name in item.data}:
        counts[("rules", SPIDER, f"field:{name}")] = sum(1 for i in items if i.data.get(name) not in EMPTY)
    return counts


def _rule_counts(rules, items) -> Counter:
    watched = rules.required or tuple(f.name for f in rules.fields)
    counts = Counter({("rules", rules.kind, "pages"): 1, ("rules", rules.kind, "items"): len(items)})
    for name in watched:
        counts[("rules", rules.kind, f"field:{name}")] = sum(1 for i in items if i.data.get(name) not in EMPTY)
    return counts
