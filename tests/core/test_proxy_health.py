"""A proxy pool's arithmetic (core/proxyhealth.py): outcomes, health, rests and turns. No database."""

import pytest

from core.proxyhealth import Candidate, Health, RestRules, after, in_turn, outcome_of, proxy_fault, sticky

RULES = RestRules(errors_to_rest=3, rest_seconds=10, max_rest_seconds=60)


@pytest.mark.parametrize(
    ("status", "code", "headers", "expected"),
    [
        (200, "", {}, "ok"),
        (404, "", {}, "ok"),  # the site's answer, carried well
        (502, "", {}, "error"),
        (None, "proxy_error", {}, "error"),
        (None, "read_timeout", {}, "error"),
        (407, "", {}, "error"),
        (200, "", {"proxy-status": "edge; error=destination_unavailable"}, "error"),
        (None, "slot_missed", {}, None),  # never sent
        (None, "blocked_address", {}, None),  # the egress guard's refusal: not the proxy's doing
        (None, "dns_error", {}, None),  # the gate resolves targets, not the proxy
    ],
)
def test_it_reads_what_an_answer_says_of_its_proxy(status, code, headers, expected):
    assert outcome_of(status, code, headers) == expected


def test_only_an_unreachable_proxy_407_or_proxy_status_error_is_surely_the_proxys_fault():
    assert proxy_fault(None, "proxy_error") and proxy_fault(407, "")
    assert not proxy_fault(502, "") and not proxy_fault(None, "read_timeout")


def test_it_rests_a_proxy_after_errors_in_a_row_and_twice_as_long_after_a_failed_trial():
    health, rests = Health(), []
    for _ in range(3):
        health, rest = after(health, "error", None, resting=False, rules=RULES)
        rests.append(rest)
    assert rests == [0, 0, 10] and health.rests_in_row == 1
    health, rest = after(health, "error", None, resting=True, rules=RULES)  # sent before the rest began
    assert rest == 0 and health.rests_in_row == 1
    trials = []
    for _ in range(4):
        health, rest = after(health, "blocked", None, resting=False, rules=RULES)
        trials.append(rest)
    assert trials == [20, 40, 60, 60], "each failed trial doubles the rest, up to the max"


def test_a_good_answer_puts_a_proxy_back_in_service_and_averages_its_latency():
    health = Health(score=20, latency_ms=100, errors_in_row=5, rests_in_row=2)
    health, rest = after(health, "ok", 200, resting=False, rules=RULES)
    assert (rest, health.errors_in_row, health.rests_in_row) == (0, 0, 0)
    assert health.latency_ms == pytest.approx(120) and health.score == pytest.approx(28)
    worse, _ = after(health, "blocked", None, resting=False, rules=RULES)
    assert worse.score < health.score and worse.latency_ms == health.latency_ms


def test_it_refuses_an_unknown_outcome():
    with pytest.raises(ValueError):
        after(Health(), "fine", None, resting=False, rules=RULES)


def test_proxies_take_requests_in_turn_and_a_resting_one_none():
    candidates = [Candidate(1, True), Candidate(2, False), Candidate(3, True)]
    assert in_turn(candidates, [0] * 5) == [1, 3, 1, 3, 1]
    assert in_turn([Candidate(1, False)], [0, 0]) == [None, None], "all resting: none"


def test_a_proxy_on_trial_gets_one_request_the_least_tried_page():
    candidates = [Candidate(1, True), Candidate(2, True, on_trial=True)]
    assert in_turn(candidates, [2, 1, 0, 2]) == [1, 1, 2, 1]
    assert in_turn([Candidate(2, True, on_trial=True)], [0, 0]) == [2, 2], "alone, it takes them all"


def test_a_session_keeps_its_proxy_and_only_a_resting_proxys_sessions_move():
    keys = [f"s{i}" for i in range(40)]
    before = {k: sticky(k, [1, 2, 3]) for k in keys}
    after_rest = {k: sticky(k, [1, 3]) for k in keys}
    assert len(set(before.values())) == 3
    assert all(after_rest[k] == before[k] for k in keys if before[k] != 2)
    chosen = in_turn([Candidate(1, True), Candidate(2, True)], [0, 0, 0], ["a", None, "a"])
    assert chosen[0] == chosen[2] == sticky("a", [1, 2])
