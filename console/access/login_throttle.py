"""Login throttling: after CRAWLHUB_LOGIN_ATTEMPTS failed logins for one user name within
CRAWLHUB_LOGIN_WINDOW_SECONDS, that name's logins are refused, right password or not, until the
window has passed since the first failure. Per name, not per address: behind a proxy every request
has the proxy's address, and one client's failures would lock everyone out. Counted in Django's
cache, which every web process shares (crawlproject/settings.py: Redis when configured, else files
under var/cache/), so the budget holds however many processes answer logins."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.core.exceptions import PermissionDenied


def _key(username) -> str:
    return "login-failures:" + str(username or "").strip().lower()[:150]


def login_throttled(username) -> bool:
    return cache.get(_key(username), 0) >= settings.CRAWLHUB_LOGIN_ATTEMPTS


def login_failed(sender=None, credentials=None, **kwargs) -> None:
    """user_login_failed: count the failure against the name tried."""
    key = _key((credentials or {}).get(get_user_model().USERNAME_FIELD))
    if not cache.add(key, 1, timeout=settings.CRAWLHUB_LOGIN_WINDOW_SECONDS):
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=settings.CRAWLHUB_LOGIN_WINDOW_SECONDS)


class ThrottledModelBackend(ModelBackend):
    """Django's backend, refusing a name over its failed-login budget (PermissionDenied stops the
    login and counts as one more failure)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        name = username if username is not None else kwargs.get(get_user_model().USERNAME_FIELD)
        if login_throttled(name):
            raise PermissionDenied("too many failed logins for this user name; try again later")
        return super().authenticate(request, username=username, password=password, **kwargs)
