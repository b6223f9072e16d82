"""Which session of a project's pool a new row's request belongs to: what a page of a session's
login asks next (the spider's form POST, a redirect) is that session's too, while it logs in."""

from crawl.models import CookieSession, Page


def login_pin(page: Page) -> dict:
    """{"session": id} for a request made from `page` while the session `page` was fetched for
    still logs in; else nothing (once logged in, the session's requests are anyone's)."""
    owner = page.request.get("session")
    if owner is None or not CookieSession.objects.filter(id=owner, state=CookieSession.State.LOGGING_IN).exists():
        return {}
    return {"session": owner}
