"""Statistics and dead rows of the frontier's tables, kept up by the crawler itself on PostgreSQL.

The frontier's tables grow fast and every row is rewritten several times. The planner chooses the
frontier's indexes from the table statistics: while they describe a table of a few hundred rows, a
claim of 50 ids scans every row of its project instead (measured: 22 ms instead of 1 at 100,000
rows). Autovacuum refreshes them about once a minute at best, and not at all where it is switched
off; so the reaper analyzes a table once a tenth of it changed, and vacuums it when autovacuum is
off and a fifth of its rows are dead. A fast crawl rewrites that much every few seconds, and each
VACUUM (ANALYZE) of the pages costs the database a few percent of the crawl's work: a table is
done again within SPACING_SECONDS of its last ANALYZE only when it has since doubled (stale
statistics of a much smaller table are what mislead the planner). One process at a time (an
advisory lock), never waiting.
"""

import logging

from django.db import connection

log = logging.getLogger("crawlhub.upkeep")
TABLES = ("crawl_page", "media_mediaasset", "scrape_item", "crawl_pagecontent")
LOCK_KEY = 0x6372776C  # pg_try_advisory_lock key of the upkeep ("crwl")
ANALYZE_FRACTION, VACUUM_FRACTION, MIN_ROWS = 0.1, 0.2, 1000
SPACING_SECONDS = 30


def tables_upkeep() -> list[str]:
    """ANALYZE (and, autovacuum being off, VACUUM) the frontier tables that need it; the commands
    run, for the log. Nothing on other databases, or while another process does it."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return []
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_KEY])
        if not cursor.fetchone()[0]:
            return []
        try:
            return _upkeep(cursor)
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])


def _upkeep(cursor) -> list[str]:
    cursor.execute("SELECT current_setting('autovacuum') = 'on'")
    autovacuum = cursor.fetchone()[0]
    cursor.execute(
        """SELECT s.relname, s.n_live_tup, s.n_dead_tup, s.n_mod_since_analyze, c.reltuples,
                  now() - greatest(s.last_analyze, s.last_autoanalyze) < make_interval(secs => %s)
           FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relname = ANY(%s)""",
        [SPACING_SECONDS, list(TABLES)],
    )
    done = []
    for table, live, dead, changed, counted, recent in cursor.fetchall():
        if recent and live <= 2 * max(counted, 0):
            continue  # analyzed moments ago at half its size or more: its statistics still hold
        if not autovacuum and dead > MIN_ROWS + VACUUM_FRACTION * live:
            done.append(f"VACUUM (ANALYZE) {table}")
        elif changed > MIN_ROWS + ANALYZE_FRACTION * live:
            done.append(f"ANALYZE {table}")
    for command in done:
        cursor.execute(command)  # table names from TABLES only
    if done:
        log.info("frontier upkeep: %s", "; ".join(done))
    return done
