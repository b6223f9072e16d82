"""A sink of one's own for the tests (Sink kind "python"): it writes each record to a file named by
its key (so a redelivered record is recognised and written once) and logs every key it is handed."""

import json
from pathlib import Path


class RecordingSink:
    def __init__(self, *, sink, directory: str):
        self.directory = Path(directory)

    def deliver(self, records: list[dict], *, batch: str) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.directory / "handed.log", "a") as log:
            log.writelines(f"{r['key']}\n" for r in records)
        for record in records:
            path = self.directory / f"{record['key']}.json"
            if not path.exists():
                path.write_text(json.dumps(record))


class BrokenSink:
    """Always fails, as a sink whose server is down does."""

    def __init__(self, *, sink):
        pass

    def deliver(self, records: list[dict], *, batch: str) -> None:
        raise ConnectionError("the results server is down")
