"""Projects, seeds and the frontier: one row per canonical URL of a project, with a state and a lease."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from crawl.validators import (
    block_rule_list,
    cookie_map,
    crontab_fields,
    css_selector,
    extension_lines,
    host_lines,
    media_kinds,
    mime_type_lines,
    regex_lines,
    status_list,
)


def default_max_depth() -> int | None:
    """A new project's max_depth: CRAWL_DEFAULT_MAX_DEPTH, none when that is 0."""
    return settings.CRAWL_DEFAULT_MAX_DEPTH or None


def default_max_pages_per_host() -> int | None:
    """A new project's max_pages_per_host: CRAWL_DEFAULT_MAX_PAGES_PER_HOST, none when that is 0."""
    return settings.CRAWL_DEFAULT_MAX_PAGES_PER_HOST or None


# Columns the pipeline writes as it runs: saving only these is no change of configuration.
BOOKKEEPING_FIELDS = frozenset(
    {"page_count", "bucket_tokens", "bucket_updated_at", "job_id", "status", "rules_changed_at", "config_changed_at"}
)


class Project(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        PAUSED = "paused", "paused"
        STOPPED = "stopped", "stopped (its job was cancelled; the recrawl schedule still runs)"

    class JobEndNotice(models.TextChoices):
        OFF = "off", "never"
        FAILURES = "failures", "when a job fails"
        ALL = "all", "when any job ends"

    class RecrawlMode(models.TextChoices):
        DUE = "due", "revisit what is due"
        ALL = "all", "recrawl everything"

    class PolitenessGroup(models.TextChoices):
        NONE = "none", "each server its own"
        IP = "ip", "servers at one IP address together"
        DOMAIN = "domain", "servers under one registrable domain together"

    name = models.CharField(
        max_length=200,
        db_index=True,
        help_text="Human name of the crawl project, one per name among the projects a team sees (another "
        "team may use the same name: their projects are unknown to each other).",
    )
    slug = models.SlugField(max_length=200, unique=True, help_text="Short identifier used by commands and the API.")
    status = models.CharField(
        max_length=10,
        choices=Status.choices,
        default=Status.ACTIVE,
        help_text="Paused and stopped projects keep their frontier but no new work is handed out; a paused "
        "project's recrawl schedule is off, a stopped one's (its job was cancelled) still runs.",
    )
    allowed_domains = models.TextField(
        blank=True,
        default="",
        help_text="Hosts in scope, one per line (subdomains included). Empty: the hosts of the seeds.",
        validators=[host_lines],
    )
    max_depth = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=default_max_depth,
        help_text="Links followed at most this many hops from a seed (0: the seeds only). Empty: no limit. "
        "New projects get CRAWL_DEFAULT_MAX_DEPTH (50 unless set), so an endless chain of links stops.",
    )
    max_pages = models.PositiveIntegerField(
        null=True, blank=True, help_text="Stop discovering new URLs once the project has this many. Empty: no limit."
    )
    page_count = models.PositiveIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="URLs the frontier holds, counted as they are added, for max_pages (empty: counted on next use).",
    )
    max_pages_per_host = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=default_max_pages_per_host,
        help_text="At most this many URLs of any one host, seeds aside (a crawler trap's budget; 0: the seeds "
        "only). Empty: no limit. New projects get CRAWL_DEFAULT_MAX_PAGES_PER_HOST (100,000 unless set).",
    )
    allow_patterns = models.TextField(
        blank=True,
        default="",
        help_text="Regexes, one per line; when set, a URL must match one to be crawled.",
        validators=[regex_lines],
    )
    deny_patterns = models.TextField(
        blank=True,
        default="",
        help_text="Regexes, one per line; a URL matching any is never crawled.",
        validators=[regex_lines],
    )
    obey_robots = models.BooleanField(default=True, help_text="Honour robots.txt (RFC 9309).")
    user_agent = models.CharField(
        max_length=300, blank=True, default="", help_text="User-Agent header. Empty: the site-wide default."
    )
    concurrency = models.PositiveSmallIntegerField(
        default=8, help_text="Requests in flight at once within one fetch batch."
    )
    weight = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Share of the workers when projects have work at once: each claim of fetch, extract and "
        "download gives a project of weight 2 twice the rows of one of weight 1 (1 to 100).",
    )
    allow_private = models.BooleanField(
        default=False, help_text="Allow loopback and private addresses (intranet crawls, tests)."
    )
    notify_job_end = models.CharField(
        max_length=10,
        choices=JobEndNotice.choices,
        default=JobEndNotice.FAILURES,
        help_text="Tell the notification targets (and webhook sinks) when a job ends: its pages, items, "
        "assets, errors, duration and a link.",
    )
    spider = models.CharField(
        max_length=100,
        blank=True,
        default="",
        help_text="Name of a registered Python spider that handles this project's pages (see scrape/spiders.py).",
    )
    api_config = models.JSONField(
        default=dict,
        blank=True,
        help_text="JSON API mode: records path, fields, JSON Schema and pagination (see scrape/jsonapi.py).",
    )
    main_text = models.BooleanField(
        default=False, help_text="Also extract the main article text with trafilatura (slow: about 0.5 s a page)."
    )
    recrawl_every_minutes = models.PositiveIntegerField(
        null=True, blank=True, help_text="Run the recrawl schedule every N minutes (kept in sync with celery beat)."
    )
    recrawl_crontab = models.CharField(
        max_length=100,
        blank=True,
        default="",
        help_text='Or a crontab for the schedule, "minute hour day-of-month month day-of-week" in UTC.',
    )
    recrawl_mode = models.CharField(
        max_length=10,
        choices=RecrawlMode.choices,
        default=RecrawlMode.DUE,
        help_text="What each tick of the schedule does: revisit what is due (the pages whose adaptive revisit "
        "time has come) or recrawl everything (every finished page, with conditional GET).",
    )
    revisit_min_seconds = models.PositiveIntegerField(
        default=3600, help_text="A page is never refetched sooner than this (pyspider's age)."
    )
    revisit_max_seconds = models.PositiveIntegerField(
        default=30 * 86400, help_text="An unchanging page is still refetched at least this often."
    )
    hub_revisit_seconds = models.PositiveIntegerField(
        default=900, help_text="Hubs (seeds, sitemaps, feeds) are refetched this often, to find new pages quickly."
    )
    rules_changed_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Last change to the project's rule sets (workers reload them)."
    )
    config_changed_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Last change to the project's settings or seeds: workers rebuild what they derive from them "
        "(scope, media rules) at their next batch.",
    )
    render_js = models.BooleanField(
        default=False, help_text="Render pages in headless Chromium (the render queue) so script-built links are seen."
    )
    follow_sitemaps = models.BooleanField(
        default=False,
        help_text="Crawl the sitemaps robots.txt names (they are always offered as inactive seeds).",
    )
    download_media = models.BooleanField(
        default=True,
        help_text="Download the media pages reference, and the downloads rule sets and spiders ask for. Off: "
        "their URLs are listed on the page's item and nothing is downloaded.",
    )
    min_delay = models.FloatField(
        default=0.0, help_text="Seconds between two requests to the same host (robots.txt Crawl-delay may raise it)."
    )
    max_per_host = models.PositiveSmallIntegerField(
        default=4, help_text="Requests in flight at once to one host, counted across all workers."
    )
    politeness_group = models.CharField(
        max_length=10,
        choices=PolitenessGroup.choices,
        default=PolitenessGroup.NONE,
        help_text="Which servers share one delay and one max_per_host: each server (host and port) its own, or "
        "every server whose host resolves to one IP address (aliases of one machine), or every server under "
        "one registrable domain (a.example.com and b.example.com), at the same port.",
    )
    rate_limit = models.FloatField(
        default=0.0, help_text="Requests per second for the whole project, all hosts and workers (0: no limit)."
    )
    rate_burst = models.PositiveIntegerField(default=10, help_text="Requests allowed at once above rate_limit.")
    bucket_tokens = models.FloatField(default=0.0, editable=False)
    bucket_updated_at = models.DateTimeField(null=True, blank=True, editable=False)
    request_headers = models.JSONField(
        default=dict, blank=True, help_text='Extra request headers, e.g. {"Accept-Language": "en"}.'
    )
    cookies = models.JSONField(
        default=dict,
        blank=True,
        validators=[cookie_map],
        help_text='Cookies sent with every request to the project\'s own sites, e.g. {"session": "x"}; '
        "at most 50, each at most 4096 bytes.",
    )
    keep_cookies = models.BooleanField(
        default=True,
        help_text="Keep the cookies the project's own sites set (Set-Cookie, also in rendered pages) as its session "
        "and send them back until they expire, from every worker: a spider that logs in stays logged in.",
    )
    proxy = models.CharField(
        max_length=300, blank=True, default="", help_text="HTTP(S) proxy URL for this project's requests. Empty: none."
    )
    session_pool_size = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Cookie sessions used in turn (each with its own cookies and login); 1: one shared session.",
    )
    session_login_url = models.URLField(
        max_length=2000,
        blank=True,
        default="",
        help_text="Each new session logs in here first (the spider's route for it, or a seed of that URL with its "
        "method and body); an answer that sends a session back here has expired it. Empty: no login.",
    )
    session_expired_selector = models.CharField(
        max_length=300,
        blank=True,
        default="",
        validators=[css_selector],
        help_text='A CSS selector that matches only on a logged-out page (e.g. "form#login"): its session is retired.',
    )
    session_retire_statuses = models.CharField(
        max_length=100,
        blank=True,
        default="",
        validators=[status_list],
        help_text='Statuses that mean a session is blocked (e.g. "403 429"): it is retired, the page tried again.',
    )
    session_max_uses = models.PositiveIntegerField(
        null=True, blank=True, help_text="A session is retired after this many requests. Empty: no limit."
    )
    session_max_errors = models.PositiveSmallIntegerField(
        default=3,
        validators=[MinValueValidator(1)],
        help_text="A session is retired after this many errors (network errors, 5xx answers).",
    )
    session_per_host = models.BooleanField(
        default=False, help_text="Pin each session to the first host it is used for (a site that ties it to one)."
    )
    proxy_per_session = models.BooleanField(
        default=False,
        help_text="With a pool of sessions and a pool of proxies: each session keeps going through one proxy "
        "(a site that ties a login to an IP address). Off: proxies are used in turn.",
    )
    block_detection = models.BooleanField(
        default=True,
        help_text='Class the common block pages as blocked (captcha pages, bot challenges, "access denied" '
        "answered with 200): they are not parsed and are tried again later, the host slowed down.",
    )
    block_rules = models.JSONField(
        default=list,
        blank=True,
        validators=[block_rule_list],
        help_text="Your own block rules, a JSON list; a rule holds when all its conditions do, e.g. "
        '[{"name": "login wall", "selector": "form#login"}, {"status": 200, "regex": "(?i)rate limited"}, '
        '{"title": "(?i)^sorry"}, {"shorter_than": 0.2}]. Conditions: status (a code or a list), regex '
        '(over the body\'s first 16 KB), title (a regex), selector (CSS; with "absent": true, blocked '
        "when it is missing), shorter_than (a share of the host's usual body length).",
    )
    media_kinds = models.CharField(
        max_length=100,
        default="image,video,audio",
        help_text="Kinds of media to download, comma-separated: image, video, audio, file.",
        validators=[media_kinds],
    )
    media_extensions = models.TextField(
        blank=True,
        default="",
        help_text="Only these file extensions (e.g. .jpg, .mp4), one per line. Empty: any.",
        validators=[extension_lines],
    )
    media_mime_types = models.TextField(
        blank=True,
        default="",
        help_text="Only these MIME types (e.g. image/*, video/mp4), one per line. Empty: any.",
        validators=[mime_type_lines],
    )
    media_max_bytes = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Largest file to keep, in bytes. Empty: the site-wide CRAWL_MAX_MEDIA_BYTES."
    )
    media_any_host = models.BooleanField(
        default=False, help_text="Download media from any host, not only the project's allowed domains."
    )
    media_page_patterns = models.TextField(
        blank=True,
        default="",
        help_text="Regexes, one per line: pages whose URL matches are video/audio pages downloaded whole with yt-dlp.",
        validators=[regex_lines],
    )
    gallery_page_patterns = models.TextField(
        blank=True,
        default="",
        help_text="Regexes, one per line: pages downloaded with gallery-dl, when the gallery-dl program is installed.",
        validators=[regex_lines],
    )
    job_id = models.BigIntegerField(
        null=True, blank=True, editable=False, help_text="The console's current job of the project (empty: none)."
    )
    spider_version_id = models.BigIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="Its active spider code version (scrape's SpiderVersion id; empty: the built-in `spider`).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        """The frontier's counter is the discovery's to write: a save leaves it as it is (this object's
        copy may be stale), except that a project without max_pages drops it (it is counted again
        when the project gets a budget)."""
        fields = kwargs.get("update_fields")
        if self.max_pages is None:
            self.page_count = None
            if fields is not None and "max_pages" in fields:
                kwargs["update_fields"] = [*fields, "page_count"]
        elif not self._state.adding and fields is None:
            kwargs["update_fields"] = [f.name for f in self._meta.concrete_fields if f.name not in ("id", "page_count")]
        fields = kwargs.get("update_fields")
        if fields is None or set(fields) - BOOKKEEPING_FIELDS:
            self.config_changed_at = timezone.now()
            if fields is not None:
                kwargs["update_fields"] = [*fields, "config_changed_at"]
        super().save(*args, **kwargs)

    def clean(self) -> None:
        if self.recrawl_every_minutes and self.recrawl_crontab:
            raise ValidationError("choose an interval or a crontab for the recrawl schedule, not both")
        if self.recrawl_crontab:
            try:
                crontab_fields(self.recrawl_crontab)
            except ValidationError as exc:
                raise ValidationError({"recrawl_crontab": exc.messages}) from None


class SessionCookie(models.Model):
    """A cookie one of the project's sites set (Set-Cookie): the project's session, shared by every
    worker, sent back by cookie rules (domain, path, secure, expiry) until it expires."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="session_cookies")
    cookie_session = models.ForeignKey(
        "crawl.CookieSession",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="cookies",
        help_text="The session of the project's pool that keeps it.",
    )
    domain = models.CharField(
        max_length=255, help_text='The host that set it, or ".example.com" for a domain and its subdomains.'
    )
    path = models.CharField(max_length=1000, default="/")
    name = models.CharField(max_length=256)
    value = models.TextField(blank=True, default="")
    secure = models.BooleanField(default=False, help_text="Sent over https only.")
    http_only = models.BooleanField(default=False)
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="When it expires. Empty: a session cookie, kept until the session is cleared."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "cookie_session", "domain", "path", "name"],
                name="uniq_session_cookie",
                nulls_distinct=False,
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.domain}{self.path})"


class Seed(models.Model):
    class Kind(models.TextChoices):
        PAGE = "page", "page"
        SITEMAP = "sitemap", "sitemap"
        FEED = "feed", "feed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="seeds")
    url = models.URLField(max_length=2000, help_text="Start URL.")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.PAGE, help_text="What the URL serves.")
    active = models.BooleanField(default=True, help_text="Inactive seeds are not (re)queued.")
    method = models.CharField(max_length=10, default="GET", help_text="GET or POST (API endpoints that need a body).")
    body = models.TextField(blank=True, default="", help_text="Request body for POST seeds.")
    headers = models.JSONField(default=dict, blank=True, help_text="Extra headers for this seed's request.")
    priority = models.SmallIntegerField(
        default=0, help_text="Pages with a higher priority are fetched sooner (rules and spiders can set it too)."
    )
    from_robots = models.BooleanField(
        default=False, help_text="Named by a robots.txt Sitemap: line, not entered by a person."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "url"], name="uniq_seed_project_url")]

    def __str__(self) -> str:
        return self.url


class Page(models.Model):
    """A URL of a project and where it is in the pipeline.

    queued -> leased (a fetch worker owns it until lease_expires_at) -> fetched -> extracted -> done,
    or failed. The extract stage leases `fetched` rows with the same lease columns. Only
    crawl/frontier/ writes the state, lease and scheduling columns.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "queued"
        LEASED = "leased", "leased"
        FETCHED = "fetched", "fetched"
        EXTRACTED = "extracted", "extracted"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    # Every index is written on each state change (PostgreSQL cannot update in place a row whose
    # indexed columns change): only the indexes the frontier's queries need, partial where they can.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="pages", db_index=False)
    url = models.TextField(help_text="Canonical URL.")
    url_key = models.CharField(max_length=64, help_text="sha256 of the canonical URL.")
    linked_url = models.TextField(
        blank=True,
        default="",
        help_text="The URL as the site linked it, when that differs from the canonical one: robots.txt is "
        "asked about both.",
    )
    host = models.CharField(
        max_length=262, help_text='The server its requests go to: the host, and ":port" when not the default one.'
    )
    depth = models.PositiveIntegerField(default=0)
    discovered_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    redirect_hops = models.PositiveSmallIntegerField(default=0, help_text="Redirects followed to reach this URL.")
    is_seed = models.BooleanField(default=False)
    kind = models.CharField(
        max_length=10, default="page", help_text="page, sitemap or feed: how the extract stage reads the response."
    )

    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    lease_token = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(
        null=True, blank=True, help_text="When the last message for it runs (empty: none, the reaper hands it out)."
    )
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Claims in the current stage (capped).")
    next_fetch_at = models.DateTimeField(default=timezone.now)
    priority = models.SmallIntegerField(default=0, help_text="Higher is fetched sooner.")
    suspect = models.BooleanField(
        default=False,
        help_text="Its worker died holding it among others: it is fetched alone, so a page that kills workers "
        "fails alone.",
    )

    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    final_url = models.TextField(blank=True, default="")
    content_type = models.CharField(max_length=200, blank=True, default="")
    title = models.TextField(blank=True, default="")
    content_sha256 = models.CharField(max_length=64, blank=True, default="")
    content_length = models.PositiveIntegerField(null=True, blank=True)
    text_hash = models.CharField(max_length=64, blank=True, default="", help_text="sha256 of the normalised text.")
    simhash = models.BigIntegerField(null=True, blank=True, help_text="64-bit near-duplicate signature (signed).")
    revisit_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Adaptive revisit interval: halved when the page changed, doubled when not."
    )
    changed_at = models.DateTimeField(null=True, blank=True, help_text="Last time its content really changed.")
    fetch_count = models.PositiveIntegerField(default=0)
    change_count = models.PositiveIntegerField(default=0)
    itag = models.CharField(
        max_length=64, blank=True, default="", help_text="Marker of what the page was extracted with (rules stamp)."
    )
    parsed = models.BooleanField(
        default=True,
        db_default=True,
        help_text="False for a response stored but not parsed (not HTML, a listing or JSON API): done, not failed.",
    )
    etag = models.CharField(max_length=500, blank=True, default="", help_text="ETag of the stored response.")
    last_modified = models.CharField(max_length=100, blank=True, default="", help_text="Its Last-Modified header.")
    not_modified_at = models.DateTimeField(null=True, blank=True, help_text="Last 304 Not Modified answer.")
    request = models.JSONField(
        default=dict, blank=True, help_text="Request overrides (method, body, headers) for seeds that need them."
    )
    fetched_at = models.DateTimeField(null=True, blank=True)
    fetch_ms = models.PositiveIntegerField(null=True, blank=True, help_text="How long the last fetch took.")
    fetched_by = models.CharField(max_length=200, blank=True, default="", help_text="Worker that fetched it.")
    cookie_session = models.ForeignKey(
        "crawl.CookieSession",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        db_index=False,
        related_name="+",
        help_text="The session of the project's pool its last fetch used.",
    )
    proxy = models.CharField(
        max_length=300, blank=True, default="", help_text="The proxy its last fetch went through (password masked)."
    )
    extracted_by = models.CharField(max_length=200, blank=True, default="", help_text="Worker that extracted it.")
    error_code = models.CharField(max_length=40, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    job_id = models.BigIntegerField(null=True, blank=True, help_text="The job that last claimed it (its project's).")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "url_key"], name="uniq_page_project_urlkey")]
        indexes = [
            models.Index(fields=["project", "state"], name="page_project_state"),
            models.Index(fields=["state", "next_fetch_at"], name="page_state_due"),
            models.Index(  # the fetch stage's claim: a project's queued pages by priority, then due time
                fields=["project", "-priority", "next_fetch_at"],
                name="page_ready",
                condition=Q(state="queued", suspect=False),
            ),
            models.Index(  # the other stage's claim: pages whose request chose render (or not) themselves
                fields=["project", "-priority", "next_fetch_at"],
                name="page_ready_override",
                condition=Q(state="queued", suspect=False, request__has_key="render"),
            ),
            models.Index(  # the extract stage's claim: a project's fetched pages nobody holds, by priority
                fields=["project", "-priority", "id"],
                name="page_extract_ready",
                condition=Q(state="fetched", lease_token__isnull=True, suspect=False),
            ),
            models.Index(fields=["host"], name="page_host"),
            models.Index(
                fields=["state", "lease_expires_at"],
                name="page_state_lease",
                condition=Q(lease_expires_at__isnull=False),
            ),
            models.Index(  # the reaper's lost work
                fields=["state", "enqueued_at"],
                name="page_state_enqueued",
                condition=Q(state__in=("queued", "fetched")),
            ),
            models.Index(fields=["project", "fetched_at"], name="page_project_fetched"),  # dashboard windows
            models.Index(fields=["job_id", "state"], name="page_job_state", condition=Q(job_id__isnull=False)),
        ]

    def __str__(self) -> str:
        return self.url


class FailedPage(Page):
    """The failed rows of the frontier, for the admin's list of failures (a proxy: no table)."""

    class Meta:
        proxy = True
        verbose_name = "failed page"


class PageContent(models.Model):
    """The stored response of a page (zlib-compressed body), read by the extract stage."""

    page = models.OneToOneField(Page, on_delete=models.CASCADE, primary_key=True, related_name="content")
    headers = models.JSONField(default=dict)
    body = models.BinaryField(help_text="zlib-compressed response body.")


class RobotsTxt(models.Model):
    """robots.txt per origin, shared by every worker and project (cached <= 24 h)."""

    origin = models.CharField(max_length=300, unique=True, help_text="scheme://host:port")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    body = models.TextField(blank=True, default="")
    error = models.CharField(max_length=200, blank=True, default="")
    fetched_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.origin


class Host(models.Model):
    """Politeness state of one server, shared by every worker: its next free slot and any back-off."""

    host = models.CharField(
        max_length=262,
        unique=True,
        help_text='The server: its host, and ":port" when the port is not the scheme\'s default ("127.0.0.1:8001").',
    )
    next_allowed_at = models.DateTimeField(default=timezone.now, help_text="No request starts before this.")
    backoff_until = models.DateTimeField(null=True, blank=True, help_text="Set by 429/503 Retry-After.")
    crawl_delay = models.FloatField(null=True, blank=True, help_text="robots.txt Crawl-delay last seen.")
    min_delay = models.FloatField(null=True, blank=True, help_text="Override: seconds between requests (any project).")
    max_in_flight = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="Override: requests in flight at once to this host, all workers and projects (replaces "
        "each project's max_per_host for it, lower or higher).",
    )
    blocked = models.BooleanField(default=False, help_text="Blocked hosts are never fetched.")
    blocked_reason = models.CharField(max_length=200, blank=True, default="")
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    failures = models.PositiveIntegerField(
        default=0,
        help_text="Failures in a row (robots.txt unreadable, the host unreachable): each holds it back longer.",
    )
    throttle_delay = models.FloatField(
        default=0.0, help_text="Seconds added between requests after 429/503 answers without Retry-After (adaptive)."
    )
    slotted_until = models.DateTimeField(
        null=True, blank=True, help_text="Pages waiting for this host have been given start times up to here."
    )
    throttle_since = models.DateTimeField(
        null=True, blank=True, help_text="When its current throttling incident began (one doubling per window)."
    )
    throttled_at = models.DateTimeField(
        null=True, blank=True, help_text="Its last 429/503 without Retry-After: the quiet period counts from here."
    )
    down_since = models.DateTimeField(
        null=True, blank=True, help_text="It stopped answering then: held back and probed until it answers."
    )
    probe_at = models.DateTimeField(null=True, blank=True, help_text="A down host's next probe (one request).")
    recovered_at = models.DateTimeField(
        null=True, blank=True, help_text="When it last answered again after being down."
    )
    slow_reason = models.CharField(
        max_length=200, blank=True, default="", help_text="What last slowed it down or held it back."
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.host


class StageWakeup(models.Model):
    """The earliest wake-up message a stage's queue has on its way (one row per queue), so that
    postponed work is woken once, not once per row; a stale time no longer counts."""

    queue = models.CharField(max_length=255, unique=True)
    due_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.queue} @ {self.due_at}"


class HostLease(models.Model):
    """Requests a batch may have in flight to a host at once; an expired lease (a killed worker's)
    simply stops counting, so capacity is never lost."""

    host = models.CharField(
        max_length=262,
        db_index=True,
        help_text="The budget it counts against: its server's own, or its group's (Project.politeness_group).",
    )
    server = models.CharField(max_length=262, default="", help_text="The server its requests go to.")
    token = models.UUIDField(db_index=True)
    slots = models.PositiveSmallIntegerField()
    expires_at = models.DateTimeField()


class PageVersion(models.Model):
    """One real change of a page: a new normalised text (a changed timestamp alone is not one)."""

    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="versions")
    fetched_at = models.DateTimeField()
    content_sha256 = models.CharField(max_length=64)
    text_hash = models.CharField(max_length=64)
    size = models.PositiveIntegerField(null=True, blank=True)
    title = models.TextField(blank=True, default="")
    text = models.TextField(blank=True, default="", help_text="The visible text of that version (for diffs).")
    job_id = models.BigIntegerField(null=True, blank=True, help_text="The job that fetched and extracted it.")

    class Meta:
        indexes = [
            models.Index(fields=["page", "fetched_at"], name="version_page_time"),
            models.Index(fields=["job_id"], name="version_job", condition=Q(job_id__isnull=False)),
        ]
        ordering = ["fetched_at", "id"]

    def __str__(self) -> str:
        return f"{self.page_id} @ {self.fetched_at:%Y-%m-%d %H:%M:%S}"


from crawl.models.assets import MediaAsset, PageAsset  # noqa: E402, F401 - the frontier's second entity
from crawl.models.blocks import HostBlock  # noqa: E402, F401
from crawl.models.proxies import ProjectProxy  # noqa: E402, F401 - a project's proxy pool
from crawl.models.sessions import CookieSession  # noqa: E402, F401 - a project's pool of sessions
