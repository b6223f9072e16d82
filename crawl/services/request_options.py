"""What a page's own request asks of its fetch beside the project's settings (a spider's
Request(proxy=, timeout=)), and the signer a higher layer may give for a project's requests
(crawl.signals.request_signer: a spider's sign() hook)."""

from collections.abc import Callable

from core.canonical import host_of
from core.net.client import FetchRequest, runner
from crawl.models import Page, Project
from crawl.policy import allows_private
from crawl.signals import request_signer

Signer = Callable[[Page, FetchRequest], FetchRequest]


class SignError(Exception):
    """A signer failed, or changed what it may not (the host its slot was booked for)."""


def page_proxy(project: Project, page: Page) -> tuple[str, bool]:
    """The proxy the page goes through, and whether it may be on a private network: the project's
    own (trusted, as its other settings are), or one the page's request names, private only where
    the project allows private addresses."""
    own = page.request.get("proxy") or ""
    if not own or own == project.proxy:
        return project.proxy, True
    return own, allows_private(project)


def page_client(project: Project, page: Page):
    """The client of a page whose request names a proxy of its own (None: the project's client)."""
    proxy, private_proxy = page_proxy(project, page)
    if proxy == project.proxy:
        return None
    return runner.client(allow_private=allows_private(project), proxy=proxy, private_proxy=private_proxy)


def signer_of(project: Project) -> Signer | None:
    """The function that signs the project's requests, if a receiver of request_signer gives one."""
    for _, answer in request_signer.send(sender=Project, project=project):
        if callable(answer):
            return answer
    return None


def signed(signer: Signer, page: Page, request: FetchRequest) -> FetchRequest:
    """The request as the signer returns it (raises SignError when it fails, or moves the request
    to another host than the one its slot was booked on)."""
    try:
        result = signer(page, request)
    except Exception as exc:  # the signer is user code: any failure fails this page only
        raise SignError(f"sign() failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(result, FetchRequest):
        raise SignError(f"sign() must return the request, not {type(result).__name__}")
    if host_of(result.url) != host_of(request.url):
        raise SignError(f"sign() may not send the request to another host ({host_of(result.url)})")
    return result
