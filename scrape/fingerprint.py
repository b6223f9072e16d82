"""Content fingerprints of page text: an exact hash and a 64-bit simhash for near duplicates. Pure.

Both work on normalise_text(), so pages that differ only in case, spacing, or numbers such as a
clock, a date or a view counter get the same fingerprint.
"""

import hashlib
import re
import string
import unicodedata

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
    return " ".join(word for word in words if not _is_counter_or_clock(word))


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
    hashes = [_shingle_hash(shingle, bits) for shingle in _shingles(words)]
    if not hashes:
        return 0
    # One string of bits per shingle; zip(*...) reads them column by column, in C.
    rows = [format(value, f"0{bits}b") for value in hashes]
    columns = ("".join(column) for column in zip(*rows, strict=True))
    majority = "".join("1" if 2 * column.count("1") > len(hashes) else "0" for column in columns)
    return int(majority, 2)


def _shingles(words: list[str]) -> list[str]:
    if len(words) < SHINGLE_WORDS:
        return [" ".join(words)] if words else []
    return [" ".join(words[i : i + SHINGLE_WORDS]) for i in range(len(words) - SHINGLE_WORDS + 1)]


def _shingle_hash(shingle: str, bits: int) -> int:
    digest = hashlib.blake2b(shingle.encode("utf-8"), digest_size=bits // 8).digest()
    return int.from_bytes(digest, "big")


def hamming(a: int, b: int) -> int:
    """Number of bits in which two fingerprints differ."""
    return (a ^ b).bit_count()


def near_duplicate(a: int, b: int, max_distance: int = 3) -> bool:
    """Whether two simhash fingerprints differ in at most max_distance bits."""
    return hamming(a, b) <= max_distance
