"""Where a project's secrets may go. Its cookies and request headers are for the sites people
entered (its allowed domains, else the hosts of the seeds they added), as a cookie jar binds a
cookie to its domain: a request anywhere else (a seed or a spider's request off those sites, a Try
a URL) goes without them. Its proxy cannot be bound to hosts, so whoever may not change network
settings may not point a project that holds secrets at another site."""

from core.canonical import InvalidURL, canonicalize, host_in_domains, host_of
from crawl.models import Project
from crawl.policy import project_scope


def secrets_go_to(url: str, domains: tuple[str, ...]) -> bool:
    """Whether a request to `url` may carry secrets bound to `domains` (subdomains included).
    No domain: no site was entered, so secrets go nowhere."""
    return bool(domains) and host_in_domains(host_of(url), domains)


def holds_secrets(project: Project) -> bool:
    """Whether the project has secrets bound to its sites: its cookies, request headers or proxy (its
    pool's too), or a session (the cookies its sites set, a login's among them)."""
    if project.cookies or project.request_headers or project.proxy:
        return True
    return project.pk is not None and (project.session_cookies.exists() or project.proxies.exists())


def project_secrets_for(project: Project, url: str) -> tuple[dict, dict]:
    """The project's request headers and cookies for a request to `url`: all of them on its own
    sites, none elsewhere."""
    if not (project.cookies or project.request_headers) or project.pk is None:
        return {}, {}
    if secrets_go_to(url, project_scope(project).domains):
        return project.request_headers, project.cookies
    return {}, {}


def secrets_refusal(project: Project, url: str) -> str | None:
    """Why a user without the network settings permission may not fetch `url` for `project` (add
    it as a seed, or try it): the project holds secrets and `url` is off its sites. None when allowed."""
    if project.pk is None or not holds_secrets(project):
        return None
    try:
        url = canonicalize(url)
    except InvalidURL:
        return None  # never fetched: refused for what it is where it is checked
    if secrets_go_to(url, project_scope(project).domains):
        return None
    return (
        f"{host_of(url) or url} is not one of this project's sites, and the project holds cookies, request "
        "headers, a proxy or a session: fetching it for this project needs the console.change_network_settings "
        "permission."
    )
