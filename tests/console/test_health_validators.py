"""The validators (console/health/validators.py) import nothing of the console, so they name the
monitor kinds as strings: every kind has its defaults or its rule's terms, and a check."""

from console.health.checks import CHECKS as BUILT_IN_CHECKS
from console.health.models import BUILT_IN_KINDS, Monitor
from console.health.rules import CHECKS as RULE_CHECKS
from console.health.validators import DEFAULTS, RULES


def test_it_knows_every_monitor_kind_once():
    assert set(DEFAULTS) | set(RULES) == set(Monitor.Kind.values)
    assert not set(DEFAULTS) & set(RULES)


def test_each_built_in_kind_has_a_check_and_each_rule_kind_too():
    assert set(DEFAULTS) == set(BUILT_IN_CHECKS) == set(BUILT_IN_KINDS)
    assert set(RULES) == set(RULE_CHECKS)
