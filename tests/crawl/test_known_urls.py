"""The per-process memory of known frontier URLs: bounded in size and in age (pure, no database)."""

import time

from core.canonical import url_key
from crawl.frontier.known_urls import KnownKeys


def test_it_remembers_what_was_added_per_project():
    known = KnownKeys(size=100)
    known.add_all([known.pack(1, url_key("http://a.test/")), known.pack_raw(1, "http://a.test/#x")])
    assert known.pack(1, url_key("http://a.test/")) in known
    assert known.pack_raw(1, "http://a.test/#x") in known
    assert known.pack(2, url_key("http://a.test/")) not in known  # another project's row is not this one's
    assert known.pack_raw(1, "http://a.test/other") not in known


def test_it_holds_at_most_two_generations():
    known = KnownKeys(size=10)
    entries = [known.pack_raw(1, f"http://a.test/{i}") for i in range(35)]
    known.add_all(entries)
    remembered = [e for e in entries if e in known]
    assert len(remembered) <= 20
    assert entries[-1] in known and entries[0] not in known  # the oldest went first


def test_it_forgets_everything_older_than_its_age_limit():
    known = KnownKeys(size=10, seconds=0.05)
    entry = known.pack_raw(1, "http://a.test/")
    known.add_all([entry])
    assert entry in known
    time.sleep(0.12)
    assert entry not in known  # a row an operator deleted is rediscovered
