"""Run the right downloader for each claimed asset, at its host's slot, and vet what came back.
Nothing is stored here."""

import asyncio
import concurrent.futures
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from django.conf import settings

from core.canonical import origin_of, server_of
from core.mediarules import MediaRules
from core.net.client import SLOT_MISSED, runner
from core.net.transport import deadline_passed, send_deadline
from core.tempfiles import temp_dir
from crawl.hosts.claims import LATE_SECONDS
from crawl.hosts.credentials import secrets_go_to
from crawl.hosts.politeness import hosts_learn_delays
from crawl.hosts.robots_cache import robots_policies
from crawl.models import MediaAsset, Project
from crawl.policy import allows_private, fetch_limits, project_media_rules, project_scope, user_agent_of
from media.downloaders import HTTP, Options, download_with
from media.downloaders.plain_http import Download, download
from media.sniff import sniff_mime


@dataclass
class Fetched:
    """What the downloader produced for one asset: one file, or several for a gallery."""

    asset: MediaAsset
    files: list[Download] = field(default_factory=list)


def download_assets(assets: list[MediaAsset], slots: dict) -> list[Fetched]:
    """Download every asset with its downloader, each at its host's slot (`slots`: asset id ->
    DownloadSlot, from the claim): a blocked host or a robots.txt refusal sends nothing, HTTP
    downloads run concurrently on the event loop (each host within its in-flight grant), the others
    (yt-dlp, gallery-dl) one host per thread, one by one. A download whose slot passed before it
    could start is not sent (`slot_missed`: it waits for another)."""
    tmp = str(temp_dir())
    results = _screen(assets, slots)
    secrets = {a.id: _secrets(a.project) for a in assets}
    http = [a for a in assets if a.downloader == HTTP and a.id not in results]
    others = defaultdict(list)
    for asset in assets:
        if asset.downloader != HTTP and asset.id not in results:
            others[slots[asset.id].grant.host].append(asset)
    running = []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(others))) as pool:
            running = [pool.submit(_run_others, group, slots, secrets, tmp) for group in others.values()]
            if http:
                answers = runner.run(_http_all(http, slots, secrets, tmp))
                results |= dict(zip([a.id for a in http], answers, strict=True))
            for future in running:
                results |= future.result()
        fetched = []
        for asset in assets:
            rules = project_media_rules(asset.project)
            fetched.append(Fetched(asset=asset, files=[vet(f, asset.kind, rules) for f in _files(results[asset.id])]))
        return fetched
    except BaseException:  # the caller never sees these files: nothing of them may stay behind
        for future in running:  # all done: the pool waited for them
            if not future.cancelled() and future.exception() is None:
                results |= future.result()
        for result in results.values():
            for file in _files(result):
                file.discard()
        raise


def _files(result: Download | list[Download]) -> list[Download]:
    """A downloader's result as files: one, or a gallery's several."""
    return result if isinstance(result, list) else [result]


def _screen(assets: list[MediaAsset], slots: dict) -> dict[int, Download]:
    """Refusals before any request: a blocked host, and plain HTTP downloads robots.txt disallows
    (or cannot say about: a robots.txt 5xx holds them back). Every host's Crawl-delay is learnt
    (yt-dlp's and gallery-dl's too) for the claims that book its slots."""
    refused, by_project = {}, defaultdict(list)
    for asset in assets:
        grant = slots[asset.id].grant
        if grant.refused:
            refused[asset.id] = Download(url=asset.url, error_code="host_blocked", error_message=grant.refused)
        elif asset.project.obey_robots:
            by_project[asset.project_id].append(asset)
    for group in by_project.values():
        project, delays = group[0].project, {}
        agent, origins = user_agent_of(project), {origin_of(a.url) for a in group}
        private = allows_private(project)
        policies = robots_policies(origins, allow_private=private, user_agent=agent, proxy=project.proxy)
        for asset in group:
            policy = policies[origin_of(asset.url)]
            delays[server_of(asset.url)] = policy.crawl_delay(agent)
            if asset.downloader == HTTP and not policy.allows(asset.url, agent):
                code, message = policy.refusal()
                refused[asset.id] = Download(url=asset.url, error_code=code, error_message=message)
        hosts_learn_delays(delays)
    return refused


def _secrets(project: Project) -> tuple[dict, Callable[[str], bool]]:
    """The project's request headers and cookies, and which URLs they may go to (its own sites)."""
    secret = dict(project.request_headers or {})
    if project.cookies:
        secret["Cookie"] = "; ".join(f"{k}={v}" for k, v in project.cookies.items())
    domains = project_scope(project).domains if secret else ()
    return secret, lambda url: secrets_go_to(url, domains)


def _last_moment(slot) -> float:
    """When a request at this slot may still be sent (0: any time): later, it would come closer than
    the host's delay to the next slot booked."""
    return slot.start_at + LATE_SECONDS if slot.grant.spacing else 0.0


def _missed(asset: MediaAsset) -> Download:
    return Download(url=asset.url, error_code=SLOT_MISSED, error_message="waiting for its host's next slot")


async def _http_all(assets: list[MediaAsset], slots: dict, secrets: dict, tmp: str) -> list[Download]:
    gates: dict[str, asyncio.Semaphore] = {}

    async def one(asset: MediaAsset) -> Download:
        slot, rules = slots[asset.id], project_media_rules(asset.project)
        limits = replace(fetch_limits(), max_bytes=rules.max_bytes, total_timeout=settings.CRAWL_MEDIA_TOTAL_TIMEOUT)
        client = runner.client(allow_private=allows_private(asset.project), proxy=asset.project.proxy)
        gate = gates.setdefault(slot.grant.host, asyncio.Semaphore(slot.grant.in_flight))
        async with gate:
            await asyncio.sleep(max(0.0, slot.start_at - time.time()))
            if deadline_passed(_last_moment(slot)):
                return _missed(asset)
            secret, allowed = secrets[asset.id]
            headers = {"User-Agent": user_agent_of(asset.project)}
            send_deadline.set(_last_moment(slot))  # checked again when the connection is ready to write
            return await download(
                client,
                asset.url,
                headers=headers,
                limits=limits,
                tmp_dir=tmp,
                secret_headers=secret,
                secrets_allowed=allowed,
            )

    return await asyncio.gather(*(one(a) for a in assets))


def _run_others(assets: list[MediaAsset], slots: dict, secrets: dict, tmp: str) -> dict[int, list[Download]]:
    """One host's yt-dlp and gallery-dl downloads, one by one, each at its slot."""
    done = {}
    for asset in sorted(assets, key=lambda a: slots[a.id].start_at):
        slot = slots[asset.id]
        time.sleep(max(0.0, slot.start_at - time.time()))
        if deadline_passed(_last_moment(slot)):
            done[asset.id] = [_missed(asset)]
            continue
        secret, allowed = secrets[asset.id]
        headers = secret if allowed(asset.url) else {}
        done[asset.id] = _run_other(asset, project_media_rules(asset.project), tmp, headers)
    return done


def _run_other(asset: MediaAsset, rules: MediaRules, tmp: str, headers: dict) -> list[Download]:
    options = Options(
        tmp_dir=tmp,
        max_bytes=rules.max_bytes,
        socket_timeout=settings.CRAWL_READ_TIMEOUT,
        allow_private=allows_private(asset.project),
        user_agent=user_agent_of(asset.project),
        proxy=asset.project.proxy,
        headers=headers,
    )
    return download_with(asset.downloader, asset.url, options)


def vet(result: Download, kind: str, rules: MediaRules) -> Download:
    """Refuse an HTML page served where media was expected, and MIME types the rules exclude.
    The stored MIME type is the one the bytes prove, else the server's."""
    if result.error_code or not result.path:
        return result
    with open(result.path, "rb") as handle:
        sniffed = sniff_mime(handle.read(512))
    result.mime = sniffed or result.mime
    if sniffed == "text/html" and kind != "file":
        return _refuse(result, "unexpected_html", f"expected {kind}, got an HTML page")
    if not rules.mime_allowed(result.mime):
        return _refuse(result, "mime_not_allowed", f"{result.mime} is not in the project's MIME types")
    return result


def _refuse(result: Download, code: str, message: str) -> Download:
    result.discard()
    result.error_code, result.error_message = code, message
    return result
