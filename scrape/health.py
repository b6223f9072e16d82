"""What an extract batch tells the health counters (crawl/health.py): pages extracted, new and
changed items, and for each rule set the pages it applied to, the items it made and how many of
them hold each watched field (the required ones, or every field when none is required)."""

from collections import Counter

from crawl.health import health_count
from scrape.extraction import PageResult, project_rule_sets

EMPTY = (None, "", [], {})


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
    health_count(project.id, counts)


def _rule_counts(rules, items) -> Counter:
    watched = rules.required or tuple(f.name for f in rules.fields)
    counts = Counter({("rules", rules.kind, "pages"): 1, ("rules", rules.kind, "items"): len(items)})
    for name in watched:
        counts[("rules", rules.kind, f"field:{name}")] = sum(1 for i in items if i.data.get(name) not in EMPTY)
    return counts
