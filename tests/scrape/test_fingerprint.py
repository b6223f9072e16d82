"""scrape.fingerprint: normalised text, exact hashes and simhash near duplicates. Pure: no database."""

import hashlib
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrape.fingerprint import hamming, near_duplicate, normalise_text, simhash, text_hash

PROSE = (
    "the council voted on tuesday to turn old freight yard into a public park with trees paths "
    "benches play area for children new bridge over river work starts in spring and should finish "
    "before summer residents asked about parking noise cost of upkeep mayor said city would pay"
)
WORDS = PROSE.split()


def article(words: int, seed: int) -> str:
    """A page-sized text of common words, the same for the same seed."""
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def test_it_casefolds_collapses_whitespace_and_drops_numbers_dates_and_clock_times():
    text = "Updated\n 12:30 (2024-05-01T12:30:00Z)  —  1,234 VIEWS, 9am, 3rd of ５ MP3s"
    assert normalise_text(text) == "updated — views, 3rd of mp3s"


def test_it_gives_the_same_text_hash_when_only_timestamps_and_counters_change():
    morning = "Park news. Updated 2024-05-01 08:15. Comments (12). 1,204 views."
    evening = "PARK news.   Updated 2024-05-02 19:40. Comments (57). 9,311 views."
    assert text_hash(morning) == text_hash(evening)
    assert text_hash(morning) != text_hash("Park news. Updated yesterday.")


def test_it_treats_a_one_word_change_as_a_different_page_but_a_near_duplicate():
    original = article(1000, seed=1)
    words = original.split()
    words[500] = "zeppelin"
    edited = " ".join(words)
    assert text_hash(original) != text_hash(edited)
    assert simhash(original) != simhash(edited)
    assert near_duplicate(simhash(original), simhash(edited))


def test_it_keeps_unrelated_texts_far_apart():
    first, second = simhash(article(300, seed=1)), simhash(article(300, seed=2))
    assert hamming(first, second) > 10
    assert not near_duplicate(first, second)


def test_it_handles_empty_and_short_texts():
    assert normalise_text("") == ""
    assert text_hash("   ") == text_hash("")
    assert simhash("") == 0
    assert simhash("42 17:05") == 0  # nothing left once numbers are dropped
    assert simhash("two words") != simhash("two other")


def test_it_sizes_the_fingerprint_by_bits_and_refuses_sizes_blake2b_cannot_make():
    assert simhash(article(50, seed=3), bits=128).bit_length() > 64
    assert simhash(article(50, seed=3), bits=16) < 2**16
    with pytest.raises(ValueError, match="multiple of 8"):
        simhash("text", bits=12)


@given(st.text())
def test_it_computes_the_same_simhash_on_every_call(text):
    assert simhash(text) == simhash(text)
    assert text_hash(text) == text_hash(text)


@given(st.text())
def test_it_normalises_idempotently(text):
    assert normalise_text(normalise_text(text)) == normalise_text(text)


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_it_measures_hamming_distance_symmetrically_and_zero_on_equal_inputs(a, b):
    assert hamming(a, b) == hamming(b, a)
    assert hamming(a, a) == 0
    assert (hamming(a, b) == 0) == (a == b)


def test_it_keeps_the_values_stored_by_earlier_versions():
    """Pages keep their simhash in the database: a faster simhash must give the very same bits,
    or stored pages would no longer compare with new ones."""
    assert simhash(article(300, seed=1)) == 3015118484569738913
    assert simhash(article(50, seed=3), bits=128) == 150392723502311385832274073079322370211
    assert simhash(article(2, seed=4)) == 1331107480939213153
    assert simhash("two words") == 12740284047219384780
    assert simhash("Ünïcode ＡＢＣ text, 3rd of 12 items") == 20969964299714633


@given(st.text(), st.sampled_from([8, 64, 128]))
def test_it_sets_each_bit_by_the_majority_of_the_shingle_hashes(text, bits):
    """The plain definition, bit by bit, as the reference for the packed computation."""
    words = normalise_text(text).split()
    shingles = [" ".join(words[i : i + 3]) for i in range(len(words) - 2)] or ([" ".join(words)] if words else [])
    hashes = [int.from_bytes(hashlib.blake2b(s.encode(), digest_size=bits // 8).digest(), "big") for s in shingles]
    expected = sum(1 << bit for bit in range(bits) if 2 * sum(h >> bit & 1 for h in hashes) > len(hashes))
    assert simhash(text, bits) == expected
