"""A bounded per-process memory of URLs known to be in the frontier (discovery's shortcut)."""

import hashlib
import time


class KnownKeys:
    """URLs this process has seen committed to the frontier, so that the links every page repeats
    (navigation, hubs) are neither canonicalized nor sent to the database again and again.

    Only a shortcut: the unique index still decides. Bounded in size and age (two generations of at
    most `size` entries; an entry is forgotten at most 2 x `seconds` after it was added), so memory
    stays flat however large the frontier grows, and a row deleted by an operator is rediscovered
    within minutes. An entry is
    the project id and 128 bits of a digest packed in one int: of the canonical URL (its url_key)
    or of the URL as a page linked it (`raw`), which stands for the same row.
    """

    def __init__(self, *, size: int = 25_000, seconds: float = 150.0):
        self.size, self.seconds = size, seconds
        self._new: set[int] = set()
        self._old: set[int] = set()
        self._started = self._old_started = time.monotonic()

    @staticmethod
    def pack_raw(project_id: int, raw: str) -> int:
        digest = hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        return project_id << 128 | int.from_bytes(digest)

    @staticmethod
    def pack(project_id: int, key: str) -> int:
        return project_id << 128 | int(key[:32], 16)

    def __contains__(self, packed: int) -> bool:
        self._rotate_if_old()
        return packed in self._new or packed in self._old

    def add_all(self, packed: list[int]) -> None:
        for item in packed:
            self._new.add(item)
            if len(self._new) >= self.size:
                self._rotate()

    def _rotate_if_old(self) -> None:
        now = time.monotonic()
        if now - self._started > self.seconds:
            self._rotate()
        if now - self._old_started > 2 * self.seconds:
            self._old = set()

    def _rotate(self) -> None:
        self._old, self._old_started = self._new, self._started
        self._new, self._started = set(), time.monotonic()


known_keys = KnownKeys()
