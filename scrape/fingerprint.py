"""Content fingerprints of page text: an exact hash and a 64-bit simhash for near duplicates. Pure.

Both work on normalise_text(), so pages that differ only in case, spacing, or numbers such as a
clock, a date or a view counter get the same fingerprint.
"""

import hashlib
import re
import string
import unicodedata
from hashlib import blake2b

SHINGLE_WORDS = 3
# Clock and calendar tokens that contain letters, so that the no-letters rule does not drop them.
_DATETIME = re.compile(
    r"\d{4}-\d{2}-\d{2}t\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}(?::?\d{2})?)?"  # ISO 8601: 2024-05-01t12:30:00z
    r"|\d{1,2}(?::\d{2}){0,2}(?:am|pm)"  # 9am, 12:30pm, 12:30:45am
)


def normalise_text(text: str) -> str:
    """Text reduced to what should decide whether two pages have the same content.

    Steps: Unicode NFKC (full-width digits become ASCII ones), casefold, split on whitespace,
    join the kept words with single spaces. A word is dropped when:
      - it has at least one digit and no letter: "42", "1,234", "12:30", "2024-05-01", "3.5",
        "+02:00", "(7)", "#12", "50%", and also prices written without a currency word ("$19.99");
      - stripped of surrounding ASCII punctuation, it is an ISO 8601 date-time
        ("2024-05-01T12:30:00Z", "2024-05-01T12:30+02:00") or a clock time with am/pm ("9am",
        "12:30pm").
    Words with letters and digits otherwise ("3rd", "mp3", "v2", "2024a") are kept.
    """
    words = unicodedata.normalize("NFKC", text).casefold().split()
    # isalpha() first: a word of letters only (most of them) is kept without a call.
    return " ".join(word for word in words if word.isalpha() or not _is_counter_or_clock(word))


def _is_counter_or_clock(word: str) -> bool:
    if not any(map(str.isdigit, word)):  # map over a C method: the hot path of every page's text
        return False
    if not any(map(str.isalpha, word)):
        return True
    return _DATETIME.fullmatch(word.strip(string.punctuation)) is not None


def text_hash(text: str) -> str:
    """SHA-256 hex digest of the normalised text: equal for exact duplicates."""
    return _sha256(normalise_text(text))


def fingerprints(text: str, bits: int = 64) -> tuple[str, int]:
    """text_hash(text) and simhash(text, bits), normalising the text once."""
    normalised = normalise_text(text)
    return _sha256(normalised), _simhash_of_words(normalised.split(), bits)


def _sha256(normalised: str) -> str:
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


def simhash(text: str, bits: int = 64) -> int:
    """Charikar's simhash over word 3-shingles of the normalised text (blake2b per shingle).

    Bit i is set when more than half of the shingles' hashes have bit i set. A text of fewer than
    three words is one shingle; an empty text hashes to 0.
    """
    return _simhash_of_words(normalise_text(text).split(), bits)


def _simhash_of_words(words: list[str], bits: int) -> int:
    if bits % 8 or not 8 <= bits <= 512:
        raise ValueError(f"bits must be a multiple of 8 from 8 to 512, not {bits}")
    shingles = _shingles(words)
    if not shingles:
        return 0
    # Column j (byte j of every shingle's hash) as one int of n bytes, and a mask with bit 0 of each
    # byte: counting bit b of the column over all shingles is then one shift, one AND and one
    # bit_count, in C, on ints n bytes long. Bit i of the fingerprint is bit i of the big-endian digest.
    size = bits // 8
    joined = b"".join([blake2b(shingle.encode(), digest_size=size).digest() for shingle in shingles])
    lowest = int.from_bytes(b"\x01" * len(shingles), "big")
    majority = 0
    for j in range(size):
        column = int.from_bytes(joined[j::size], "big")
        for b in range(8):
            if 2 * (column >> b & lowest).bit_count() > len(shingles):
                majority |= 1 << ((size - 1 - j) * 8 + b)
    return majority


def _shingles(words: list[str]) -> list[str]:
    if len(words) < SHINGLE_WORDS:
        return [" ".join(words)] if words else []
    return list(
        map(" ".join, zip(*(words[i:] for i in range(SHINGLE_WORDS)), strict=False))
    )  # zip stops at the shortest slice


def hamming(a: int, b: int) -> int:
    """Number of bits in which two fingerprints differ."""
    return (a ^ b).bit_count()


def near_duplicate(a: int, b: int, max_distance: int = 3) -> bool:
    """Whether two simhash fingerprints differ in at most max_distance bits."""
    return hamming(a, b) <= max_distance
