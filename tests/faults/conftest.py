"""The fault suite prints its figures as one table at the end of the run (`make faults`)."""

from tests.faults.harness import RESULTS


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    write = terminalreporter.write_line
    terminalreporter.section("fault injection: ledger figures")
    header = (
        f"{'scenario':<44} {'pages':>6} {'lost':>5} {'dups':>5} {'kills':>5} {'extra fetches':>13} {'bound':>6} "
        f"{'seconds':>8}"
    )
    write(header)
    write("-" * len(header))
    for f in RESULTS:
        write(
            f"{f.scenario:<44} {f.pages:>6} {f.lost:>5} {f.duplicates:>5} {f.kills:>5} {f.extra_fetches:>13} "
            f"{f.bound:>6} {f.seconds:>8.1f}"
        )
