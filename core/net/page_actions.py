"""Declarative page actions a render runs after the page loads: scroll until the page stops growing,
click a selector until it disappears, wait for a selector, run a small script.

No Django, no Playwright import: `actions_checked` validates the JSON a rule set, a spider route or
a request gives (a list of objects), and `actions_run` drives a Playwright page with them. Every
wait is bounded by the render's deadline, so actions never outlast the render's budget; `pace`
seconds pass between two steps that may load more (a scroll, a click), so the site sees the
page's own requests no closer than its politeness delay.

    [{"action": "scroll", "max": 10},
     {"action": "click", "selector": "button.more", "max": 5},
     {"action": "wait_for", "selector": ".item"},
     {"action": "script", "source": "document.querySelector('#accept')?.click()"}]
"""

import logging
import time
from typing import Any

log = logging.getLogger("crawlhub.render")

KEYS = {
    "scroll": {"max", "idle_ms"},
    "click": {"selector", "max", "idle_ms"},
    "wait_for": {"selector", "timeout_ms"},
    "script": {"source"},
}
MAX_ACTIONS = 20
MAX_REPEATS = 100  # scrolls or clicks of one action
MAX_SCRIPT_CHARS = 10_000
DEFAULT_MAX = 10
DEFAULT_IDLE_MS = 1500  # how long a scroll or click may take to show its effect
DEFAULT_WAIT_MS = 10_000
HEIGHT = "document.documentElement.scrollHeight"
SIZE = "document.getElementsByTagName('*').length"


class ActionError(ValueError):
    """Page actions that cannot be run: the message names the action and the problem."""


def actions_checked(actions: Any) -> list[dict]:
    """The actions as given, checked: a list of at most MAX_ACTIONS objects, each with a known
    `action` and only its own keys, of the right types."""
    if actions is None:
        return []
    if not isinstance(actions, list) or len(actions) > MAX_ACTIONS:
        raise ActionError(f"actions: must be a list of at most {MAX_ACTIONS} objects")
    return [_checked(i, action) for i, action in enumerate(actions)]


def _checked(index: int, action: Any) -> dict:
    where = f"actions[{index}]"
    kind = action.get("action") if isinstance(action, dict) else None
    if kind not in KEYS:
        raise ActionError(f"{where}: needs an action, one of {', '.join(KEYS)}")
    unknown = sorted(set(action) - KEYS[kind] - {"action"})
    if unknown:
        raise ActionError(f"{where}: unknown key {unknown[0]!r} for {kind} (allowed: {', '.join(sorted(KEYS[kind]))})")
    for name in ("selector", "source"):
        if name in KEYS[kind] and not (isinstance(action.get(name), str) and action[name].strip()):
            raise ActionError(f"{where}: {kind} needs a non-empty {name}")
    if len(action.get("source", "")) > MAX_SCRIPT_CHARS:
        raise ActionError(f"{where}: script is longer than {MAX_SCRIPT_CHARS} characters")
    for name, top in (("max", MAX_REPEATS), ("idle_ms", 60_000), ("timeout_ms", 60_000)):
        value = action.get(name, 1)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise ActionError(f"{where}: {name} must be a whole number from 1 to {top}, not {value!r}")
    return dict(action)


def actions_run(page, actions: list[dict], *, deadline: float, pace: float = 0.0) -> list[str]:
    """Run the actions on a loaded Playwright page, in order, until `deadline` (time.monotonic());
    returns one line per action saying what it did. A scroll or click that shows no effect within
    its idle time ends that action; a selector that never shows ends the wait. A script that
    fails raises (Playwright's Error): the render fails with its message."""
    done = []
    steps = _Steps(deadline, pace)
    for action in actions:
        if steps.remaining_ms() <= 0:
            done.append(f"{action['action']}: skipped, the render's time is up")
            continue
        done.append(RUNNERS[action["action"]](page, action, steps))
    if done:
        log.info("page actions on %s: %s", page.url, "; ".join(done))
    return done


class _Steps:
    """The render's deadline, and the pace between two steps that may load more."""

    def __init__(self, deadline: float, pace: float):
        self.deadline, self.pace, self.last = deadline, pace, 0.0

    def remaining_ms(self) -> float:
        return (self.deadline - time.monotonic()) * 1000

    def wait_ms(self, wanted: int) -> float:
        return max(1.0, min(float(wanted), self.remaining_ms()))

    def paced(self) -> bool:
        """Wait out the pace since the last step; False when the deadline comes first."""
        pause = self.last + self.pace - time.monotonic()
        if pause > 0:
            if pause * 1000 >= self.remaining_ms():
                return False
            time.sleep(pause)
        self.last = time.monotonic()
        return self.remaining_ms() > 0


def _grew(page, expression: str, before: int, wait_ms: float) -> bool:
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    try:
        page.wait_for_function(f"before => {expression} > before", arg=before, timeout=wait_ms)
    except PlaywrightTimeoutError:
        return False
    return True


def _scroll(page, action: dict, steps: _Steps) -> str:
    grown = 0
    for _ in range(action.get("max", DEFAULT_MAX)):
        if not steps.paced():
            break
        height = page.evaluate(HEIGHT)
        page.evaluate(f"window.scrollTo(0, {HEIGHT})")
        if not _grew(page, HEIGHT, height, steps.wait_ms(action.get("idle_ms", DEFAULT_IDLE_MS))):
            break
        grown += 1
    return f"scroll: the page grew {grown} times"


def _click(page, action: dict, steps: _Steps) -> str:
    from playwright.sync_api import Error as PlaywrightError

    selector, clicks = action["selector"], 0
    for _ in range(action.get("max", DEFAULT_MAX)):
        target = page.locator(selector).first
        if target.count() == 0 or not target.is_visible() or not steps.paced():
            break
        size = page.evaluate(SIZE)
        try:
            target.click(timeout=steps.wait_ms(DEFAULT_IDLE_MS))
        except PlaywrightError:  # it went away, or something covers it
            break
        clicks += 1
        if not _grew(page, SIZE, size, steps.wait_ms(action.get("idle_ms", DEFAULT_IDLE_MS))):
            break
    return f"click {selector}: {clicks} clicks"


def _wait_for(page, action: dict, steps: _Steps) -> str:
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    wait_ms = steps.wait_ms(action.get("timeout_ms", DEFAULT_WAIT_MS))
    try:
        page.wait_for_selector(action["selector"], timeout=wait_ms)
    except PlaywrightTimeoutError:
        return f"wait_for {action['selector']}: not there after {wait_ms / 1000:g} s"
    return f"wait_for {action['selector']}: there"


def _script(page, action: dict, steps: _Steps) -> str:
    page.evaluate(action["source"])
    return "script: run"


RUNNERS = {"scroll": _scroll, "click": _click, "wait_for": _wait_for, "script": _script}
