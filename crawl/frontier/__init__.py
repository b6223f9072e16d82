"""The frontier: the one place where pages and assets change state, and the only caller of the
stage publishers. Stages hand it verdicts (verdicts.py); it turns them into columns, by
compare-and-set on the lease, and into the messages owed after the commit."""
