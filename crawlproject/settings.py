"""crawlhub settings: everything comes from the environment (see .env.example), read in one place.

Embedded default: SQLite under var/ and the kombu filesystem broker under var/broker, no servers.
Distributed: DATABASE_URL=postgres://..., CELERY_BROKER_URL=redis://...
"""

import email.utils
import os
from pathlib import Path

import environ

from crawlproject.control_tasks import beat_schedule
from crawlproject.envsafety import kept_secret_key, private_file, refuse_placeholder_secrets

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

VAR_DIR = Path(env.str("CRAWLHUB_VAR_DIR", default=str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env.bool("DJANGO_DEBUG", default=False)
# Unset: a random key made once and kept in VAR_DIR/secret-key, so the embedded default needs no setup.
SECRET_KEY = env.str("DJANGO_SECRET_KEY") if "DJANGO_SECRET_KEY" in os.environ else kept_secret_key(VAR_DIR)
if not DEBUG:  # placeholder secrets (change-me..., example) and short keys stop the start: envsafety.py
    refuse_placeholder_secrets(os.environ)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])
# Production switch: served over HTTPS by a TLS-terminating proxy that sets X-Forwarded-Proto. It turns
# on the redirect to https, secure cookies and HSTS (each can still be set on its own); off for local
# dev, the embedded `make crawl` and the tests. `manage.py check --deploy` is clean with it on.
BEHIND_HTTPS_PROXY = env.bool("DJANGO_BEHIND_HTTPS_PROXY", default=False)
if BEHIND_HTTPS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=BEHIND_HTTPS_PROXY)
# Prometheus scrapes over the internal network; a redirect would not protect its token anyway.
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=BEHIND_HTTPS_PROXY)
# Start low; raise to 31536000 (a year) once every subdomain is known to serve HTTPS.
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=3600 if BEHIND_HTTPS_PROXY else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", default=BEHIND_HTTPS_PROXY)
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=BEHIND_HTTPS_PROXY)
X_FRAME_OPTIONS = "DENY"
# Failed logins allowed per user name within the window; then its logins wait (console/login_throttle.py).
AUTHENTICATION_BACKENDS = ["console.login_throttle.ThrottledModelBackend"]
CRAWLHUB_LOGIN_ATTEMPTS = env.int("CRAWLHUB_LOGIN_ATTEMPTS", default=10)
CRAWLHUB_LOGIN_WINDOW_SECONDS = env.int("CRAWLHUB_LOGIN_WINDOW_SECONDS", default=900)
# /metrics (console/metrics.py): scrapers send `Authorization: Bearer <token>`; empty: staff sessions only.
CRAWLHUB_METRICS_TOKEN = env.str("CRAWLHUB_METRICS_TOKEN", default="")

INSTALLED_APPS = [
    "console.admin_app.AdminOnDemandConfig",  # django.contrib.admin; its modules load with the URLs
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_celery_beat",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_ace",  # the console's code editor (Ace), its files served from here: no CDN
    "crawl",
    "fetch",
    "scrape",
    "media",
    "sinks",
    "console",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "console.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "crawlproject.urls"
LOGIN_URL = "/admin/login/"
WSGI_APPLICATION = "crawlproject.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database --------------------------------------------------------------------------------
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers run beside the one writer; IMMEDIATE takes the write lock at BEGIN so two
    # workers never deadlock upgrading a read lock; timeout waits for the lock instead of failing.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}
    if DATABASES["default"]["NAME"] not in ("", ":memory:"):
        private_file(Path(DATABASES["default"]["NAME"]))
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DATABASE_CONN_MAX_AGE", default=60))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("DJANGO_STATIC_ROOT", default=str(VAR_DIR / "static")))
# whitenoise serves the apps' static files straight from their folders when `collectstatic` has not
# run, so the admin is styled with DEBUG off on a fresh checkout.
WHITENOISE_USE_FINDERS = True

# --- REST API (console/api/): nothing is readable without authentication ----------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # JSON nested past the recursion limit is a 400 (console/api/parsers.py), not a 500.
    "DEFAULT_PARSER_CLASSES": [
        "console.api.parsers.JSONBodyParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # The browsable API shows at most 200,000 characters of a response (console/api/renderers.py).
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "console.api.renderers.CappedBrowsableAPIRenderer",
    ],
    "DEFAULT_PAGINATION_CLASS": "console.api.pagination.IdCursorPagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "crawlhub API",
    "DESCRIPTION": "Projects, seeds, the frontier, extracted items and media assets of crawlhub.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "console.models.Job.State",
        "JobKindEnum": "console.models.Job.Kind",
        "SinkKindEnum": "sinks.models.Sink.Kind",
    },
}

# --- Media storage (content-addressed assets) -------------------------------------------------
MEDIA_ROOT = Path(env.str("CRAWLHUB_MEDIA_ROOT", default=str(VAR_DIR / "assets")))
MEDIA_URL = "assets/"
# >>> STORAGES (core/storage.py writes and reads through STORAGES["default"]) >>>>>>>>>>>>>>>>>>>>>>>
# CRAWLHUB_STORAGE=filesystem (default): files under MEDIA_ROOT. CRAWLHUB_STORAGE=s3: django-storages
# on S3 or MinIO, configured only from the environment (Celery workers and web read the same vars).
CRAWLHUB_STORAGE = env.str("CRAWLHUB_STORAGE", default="filesystem")
# Browsers may need another host than the app (e.g. http://minio:9000 inside compose): presigned GET
# URLs are signed for this endpoint when set. Empty: signed for AWS_S3_ENDPOINT_URL.
AWS_S3_PUBLIC_ENDPOINT_URL = env.str("AWS_S3_PUBLIC_ENDPOINT_URL", default="") or None
if CRAWLHUB_STORAGE == "filesystem":
    _media_storage = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
elif CRAWLHUB_STORAGE == "s3":
    from botocore.config import Config as _BotoConfig
    from django.core.exceptions import ImproperlyConfigured

    if not env.str("AWS_STORAGE_BUCKET_NAME", default=""):
        raise ImproperlyConfigured("CRAWLHUB_STORAGE=s3 needs AWS_STORAGE_BUCKET_NAME")
    _media_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env.str("AWS_STORAGE_BUCKET_NAME"),
            "endpoint_url": env.str("AWS_S3_ENDPOINT_URL", default="") or None,
            "access_key": env.str("AWS_ACCESS_KEY_ID", default="") or None,
            "secret_key": env.str("AWS_SECRET_ACCESS_KEY", default="") or None,
            "region_name": env.str("AWS_S3_REGION_NAME", default="us-east-1"),
            "file_overwrite": False,
            "querystring_auth": True,
            "querystring_expire": env.int("AWS_QUERYSTRING_EXPIRE", default=3600),
            # With client_config set, django-storages ignores its addressing_style and
            # signature_version options: they live here. Short timeouts and few retries make a
            # down server fail the task fast (storage_error, retried later) instead of hanging it.
            "client_config": _BotoConfig(
                s3={"addressing_style": "path"},
                signature_version="s3v4",
                connect_timeout=5,
                read_timeout=30,
                retries={"max_attempts": 2, "mode": "standard"},
            ),
        },
    }
else:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"CRAWLHUB_STORAGE must be filesystem or s3, not {CRAWLHUB_STORAGE!r}")
STORAGES = {
    "default": _media_storage,
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# <<< STORAGES <<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<

# --- Celery: the database holds the truth, the broker only says which ids have work -------------
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://localhost/")
CELERY_EMBEDDED_BROKER = CELERY_BROKER_URL.startswith("filesystem://")

# The cache every web process shares (the login throttle counts there): Redis when the broker is
# Redis (keys under a prefix), else files under var/cache/ that the processes of one machine share.
CRAWLHUB_CACHE_URL = env.str(
    "CRAWLHUB_CACHE_URL", default=CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis:", "rediss:")) else ""
)
if CRAWLHUB_CACHE_URL.startswith(("redis:", "rediss:")):
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": CRAWLHUB_CACHE_URL,
            "KEY_PREFIX": "crawlhub-cache",
        }
    }
elif CRAWLHUB_CACHE_URL:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"CRAWLHUB_CACHE_URL must be a redis:// or rediss:// URL, not {CRAWLHUB_CACHE_URL!r}")
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache" / "django"),
        }
    }
if CELERY_EMBEDDED_BROKER:
    for sub in ("data", "control", "processed"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "data"),
        "data_folder_out": str(BROKER_DIR / "data"),
        "control_folder": str(BROKER_DIR / "control"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": False,
        # How soon an idle consumer sees a new message (a busy one reads on without waiting): at
        # 0.1 s the stages waited on each other, 240 pages/s against 417 at 0.01 on the bench site.
        # After 2 s without a message it looks only twice a second (crawlproject/broker.py).
        "polling_interval": 0.01,
    }
else:
    # Above every task's hard time limit, so a running task is never redelivered; a killed
    # worker's work comes back sooner through the lease reaper (crawl.frontier.reaper).
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 1800}
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
# A task whose process died is requeued by the broker (Redis). With the embedded filesystem
# transport the message is acked instead: the lease and the reaper bring the work back, and the
# crawl command restarts an embedded worker that stops taking messages after such kills.
CELERY_TASK_REJECT_ON_WORKER_LOST = not CELERY_EMBEDDED_BROKER
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_MAX_TASKS_PER_CHILD = env.int("CELERY_WORKER_MAX_TASKS_PER_CHILD", default=1000)
# Celery's Django fixup closes every database connection before and after each task unless this is
# set; then it closes them every N tasks (CONN_MAX_AGE and the health checks still apply). Measured
# on the bench: a new PostgreSQL backend per task cost more CPU than the queries it served.
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=200)
CELERY_WORKER_SEND_TASK_EVENTS = env.bool("CELERY_WORKER_SEND_TASK_EVENTS", default=not CELERY_EMBEDDED_BROKER)
CELERY_TASK_SEND_SENT_EVENT = CELERY_WORKER_SEND_TASK_EVENTS
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"
CELERY_ENABLE_UTC = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULER = "console.runs.beat:HeartbeatScheduler"  # the DatabaseScheduler, with a heartbeat

# --- Crawl behaviour ---------------------------------------------------------------------------
CRAWL_FETCH_BATCH = env.int("CRAWL_FETCH_BATCH", default=50)
# How long one process of a worker keeps claiming and fetching ready pages (0: one claim a wake-up).
CRAWL_FETCH_SESSION_SECONDS = env.float("CRAWL_FETCH_SESSION_SECONDS", default=20.0)
CRAWL_EXTRACT_BATCH = env.int("CRAWL_EXTRACT_BATCH", default=50)
CRAWL_RENDER_BATCH = env.int("CRAWL_RENDER_BATCH", default=10)
CRAWL_RENDER_TIMEOUT = env.float("CRAWL_RENDER_TIMEOUT", default=30.0)
CRAWL_CHROMIUM_PATH = env.str("CRAWL_CHROMIUM_PATH", default="")
# Rendered samples of an auto-render route that must match their plain pages before it is fetched plainly.
CRAWL_RENDER_AUTO_SAMPLES = env.int("CRAWL_RENDER_AUTO_SAMPLES", default=3)
CRAWL_DOWNLOAD_BATCH = env.int("CRAWL_DOWNLOAD_BATCH", default=10)
# A claimed batch is owned for this long; after it the reaper gives the work to someone else.
CRAWL_LEASE_SECONDS = env.int("CRAWL_LEASE_SECONDS", default=600)
# The stage tasks' commits wait for PostgreSQL's disk flush only when this is on (crawlproject/dbconnections.py).
CRAWL_STAGE_SYNCHRONOUS_COMMIT = env.bool("CRAWL_STAGE_SYNCHRONOUS_COMMIT", default=False)
# A row the reaper sent alone (a suspect) whose message was lost is sent again after this long; other
# work is pulled by wake-ups. A duplicate message claims nothing, so this can be short.
CRAWL_REPUBLISH_SECONDS = env.int("CRAWL_REPUBLISH_SECONDS", default=30)
CRAWL_REAP_INTERVAL_SECONDS = env.int("CRAWL_REAP_INTERVAL_SECONDS", default=10)
# Work that waits (politeness, Retry-After, retry back-off) is woken by a message with a countdown of
# at most this many seconds; longer waits are handed out by the reaper once due. Keep it well under
# the broker's visibility timeout (1800 s), or a delayed message is delivered twice.
CRAWL_WAKEUP_MAX_SECONDS = env.int("CRAWL_WAKEUP_MAX_SECONDS", default=300)
CRAWL_MAX_ATTEMPTS = env.int("CRAWL_MAX_ATTEMPTS", default=3)
# Transient failures wait base * 2^(attempt-1) seconds (capped at 1 h) before the next attempt.
CRAWL_RETRY_BASE_SECONDS = env.float("CRAWL_RETRY_BASE_SECONDS", default=30.0)
# Pages fetched before, and the hubs of projects with a recrawl schedule, are never given up for a
# transient failure: after the attempts above they are retried this long after, doubling each time
# up to the maximum.
CRAWL_RETRY_LONG_SECONDS = env.float("CRAWL_RETRY_LONG_SECONDS", default=300.0)
CRAWL_RETRY_MAX_SECONDS = env.float("CRAWL_RETRY_MAX_SECONDS", default=6 * 3600.0)
# A host that answers 429/503 without Retry-After is slowed down (crawl/hosts/backoff.py): such
# answers within the window of the first count as one incident (one doubling of its extra delay),
# and after the quiet period without one its delay is back at the configured floor.
CRAWL_THROTTLE_WINDOW_SECONDS = env.float("CRAWL_THROTTLE_WINDOW_SECONDS", default=30.0)
CRAWL_THROTTLE_FORGIVE_SECONDS = env.float("CRAWL_THROTTLE_FORGIVE_SECONDS", default=300.0)
# A host that stopped answering is held back, and probed this often with one request; the moment it
# answers, the pages waiting for it are due again.
CRAWL_HOST_PROBE_SECONDS = env.float("CRAWL_HOST_PROBE_SECONDS", default=10.0)
# A project's proxy pool (fetch/proxy_pool.py): a proxy that spoils this many answers in a row (errors
# or blocks) rests this long, then is tried again with one request; each rest in a row doubles, up to the max.
CRAWL_PROXY_ERRORS_TO_REST = env.int("CRAWL_PROXY_ERRORS_TO_REST", default=3)
CRAWL_PROXY_REST_SECONDS = env.float("CRAWL_PROXY_REST_SECONDS", default=60.0)
CRAWL_PROXY_MAX_REST_SECONDS = env.float("CRAWL_PROXY_MAX_REST_SECONDS", default=3600.0)
CRAWL_MAX_BODY_BYTES = env.int("CRAWL_MAX_BODY_BYTES", default=10 * 1024 * 1024)
CRAWL_MAX_MEDIA_BYTES = env.int("CRAWL_MAX_MEDIA_BYTES", default=200 * 1024 * 1024)
CRAWL_MEDIA_TOTAL_TIMEOUT = env.float("CRAWL_MEDIA_TOTAL_TIMEOUT", default=600.0)
# A download batch is stopped softly after this many seconds, and its process killed after the hard
# limit; its assets' leases then expire and count as attempts (CRAWL_MAX_ATTEMPTS), so a media URL
# that trickles forever ends failed instead of looping.
CRAWL_DOWNLOAD_SOFT_TIME_LIMIT = env.int("CRAWL_DOWNLOAD_SOFT_TIME_LIMIT", default=840)
CRAWL_DOWNLOAD_TIME_LIMIT = env.int("CRAWL_DOWNLOAD_TIME_LIMIT", default=900)
CRAWL_CONNECT_TIMEOUT = env.float("CRAWL_CONNECT_TIMEOUT", default=10.0)
CRAWL_READ_TIMEOUT = env.float("CRAWL_READ_TIMEOUT", default=20.0)
CRAWL_TOTAL_TIMEOUT = env.float("CRAWL_TOTAL_TIMEOUT", default=60.0)
CRAWL_MAX_REDIRECTS = env.int("CRAWL_MAX_REDIRECTS", default=5)
CRAWL_MAX_LINKS_PER_PAGE = env.int("CRAWL_MAX_LINKS_PER_PAGE", default=5000)
# What one page may make at most; the excess is counted on the page's item and logged.
CRAWL_MAX_ITEMS_PER_PAGE = env.int("CRAWL_MAX_ITEMS_PER_PAGE", default=10_000)
CRAWL_MAX_MEDIA_PER_PAGE = env.int("CRAWL_MAX_MEDIA_PER_PAGE", default=1000)
CRAWL_MAX_OPENGRAPH_KEYS = env.int("CRAWL_MAX_OPENGRAPH_KEYS", default=100)
CRAWL_MAX_JSON_LD_BLOCKS = env.int("CRAWL_MAX_JSON_LD_BLOCKS", default=50)
# Sitemaps named by robots.txt kept as a project's sitemap seeds: a hostile robots.txt of thousands
# of Sitemap: lines adds no more.
CRAWL_MAX_ROBOTS_SITEMAPS = env.int("CRAWL_MAX_ROBOTS_SITEMAPS", default=50)
# Seconds one match of a user's regex (scope, media and extraction patterns) may take before it
# counts as no match (core/patterns.py): a catastrophic pattern on a hostile page gives up.
CRAWL_REGEX_TIMEOUT = env.float("CRAWL_REGEX_TIMEOUT", default=0.2)
# Block detection (core/blocks.py): the first bytes of each answer its markers and regex rules read.
CRAWL_BLOCK_SCAN_BYTES = env.int("CRAWL_BLOCK_SCAN_BYTES", default=16 * 1024)
# What a new project's max_depth and max_pages_per_host start at, so a URL trap (an endless
# /next/N chain, a calendar) ends on its own; a project raises or clears them. 0: no such default.
CRAWL_DEFAULT_MAX_DEPTH = env.int("CRAWL_DEFAULT_MAX_DEPTH", default=50)
CRAWL_DEFAULT_MAX_PAGES_PER_HOST = env.int("CRAWL_DEFAULT_MAX_PAGES_PER_HOST", default=100_000)
CRAWL_ROBOTS_CACHE_SECONDS = env.int("CRAWL_ROBOTS_CACHE_SECONDS", default=24 * 3600)
# Global switch for intranet deployments and tests; a project can also allow private networks.
CRAWL_ALLOW_PRIVATE = env.bool("CRAWL_ALLOW_PRIVATE", default=False)
# Non-public networks that are reachable anyway, as CIDRs (e.g. one intranet subnet); everything
# else non-public stays refused. Link-local and cloud metadata addresses (169.254.0.0/16, fe80::/10,
# 100.100.100.200, fd00:ec2::254) are reachable only when named here, even with allow_private.
CRAWL_ALLOWED_NETWORKS = env.list("CRAWL_ALLOWED_NETWORKS", default=[])
# The crawler's own servers, host:port or URLs, refused even with allow_private. The database, the
# broker and the storage endpoint are added to these from their own settings.
# Flower, and the console: `serve`'s default port and docker-compose's web service.
CRAWL_REFUSED_SERVICES = env.list(
    "CRAWL_REFUSED_SERVICES", default=["flower:5555", "localhost:5555", "localhost:8000", "web:8000"]
)
# Python modules whose @register'ed spiders projects can name (scrape/spiders.py).
CRAWL_SPIDER_MODULES = env.list("CRAWL_SPIDER_MODULES", default=["scrape.example_spiders"])
# The spider debugger runs draft code in a worker's child process under these limits (scrape/sandbox.py).
CRAWL_DEBUG_SECONDS = env.float("CRAWL_DEBUG_SECONDS", default=20)
CRAWL_DEBUG_MEMORY_MB = env.int("CRAWL_DEBUG_MEMORY_MB", default=1024)
CRAWL_DEBUG_STORED_PAGES = env.int("CRAWL_DEBUG_STORED_PAGES", default=30)  # "run on stored pages": the last N
CRAWL_DEFAULT_USER_AGENT = env.str(
    "CRAWL_DEFAULT_USER_AGENT", default="crawlhub/0.1 (+https://github.com/crawlhub/crawlhub)"
)

CONSOLE_JOBS_TICK_SECONDS = env.int("CONSOLE_JOBS_TICK_SECONDS", default=5)  # beat's jobs tick
CONSOLE_MONITORS_TICK_SECONDS = env.int("CONSOLE_MONITORS_TICK_SECONDS", default=30)  # beat's monitors tick
CELERY_BEAT_SCHEDULE = beat_schedule(globals())  # the periodic tasks of crawlproject/control_tasks.py

# --- Result sinks (sinks/): where items, pages and assets are delivered as they are stored
CRAWL_SINK_ROOT = Path(env.str("CRAWL_SINK_ROOT", default=str(VAR_DIR / "sinks")))  # file and tar sinks
CRAWL_SINK_BATCH = env.int("CRAWL_SINK_BATCH", default=200)  # records per delivery (one tar or JSONL object)
CRAWL_SINK_MAX_ATTEMPTS = env.int("CRAWL_SINK_MAX_ATTEMPTS", default=8)  # then the records fail, shown
CRAWL_SINK_MAX_BACKOFF_SECONDS = env.int("CRAWL_SINK_MAX_BACKOFF_SECONDS", default=300)
CRAWL_SINK_LEASE_SECONDS = env.int("CRAWL_SINK_LEASE_SECONDS", default=180)  # > the task's 120 s time limit

# --- The console (console/): jobs, their logs, the workers' heartbeats ----------------------------
CONSOLE_JOB_LOG_LIMIT = env.int("CONSOLE_JOB_LOG_LIMIT", default=500)  # log entries kept per job
CONSOLE_HEARTBEAT_SECONDS = env.int("CONSOLE_HEARTBEAT_SECONDS", default=10)
# A worker not seen for this long is gone (killed, or its machine is): the dashboard warns.
CONSOLE_WORKER_STALE_SECONDS = env.int("CONSOLE_WORKER_STALE_SECONDS", default=35)
# Retention (console/exports/retention.py): days rows are kept, then pruned in batches; 0 keeps them forever.
CONSOLE_KEEP_JOBS_DAYS = env.int("CONSOLE_KEEP_JOBS_DAYS", default=90)  # finished jobs, with their logs
CONSOLE_KEEP_JOB_LOGS_DAYS = env.int("CONSOLE_KEEP_JOB_LOGS_DAYS", default=30)
CONSOLE_KEEP_PAGE_VERSIONS_DAYS = env.int("CONSOLE_KEEP_PAGE_VERSIONS_DAYS", default=180)  # never a page's newest
CONSOLE_KEEP_SINK_RECORDS_DAYS = env.int("CONSOLE_KEEP_SINK_RECORDS_DAYS", default=7)  # delivered ones only
CONSOLE_KEEP_ALERTS_DAYS = env.int("CONSOLE_KEEP_ALERTS_DAYS", default=90)  # resolved ones only
CONSOLE_KEEP_DEBUG_RUNS_DAYS = env.int("CONSOLE_KEEP_DEBUG_RUNS_DAYS", default=1)  # the debugger's runs
CONSOLE_PRUNE_BATCH = env.int("CONSOLE_PRUNE_BATCH", default=500)  # rows per delete statement

# --- Monitoring and alerts (console/health/: counters, monitors, notify) ---------------------------
CONSOLE_HEALTH_BUCKET_SECONDS = env.int("CONSOLE_HEALTH_BUCKET_SECONDS", default=60)  # health counters' step
CONSOLE_HEALTH_KEEP_DAYS = env.int("CONSOLE_HEALTH_KEEP_DAYS", default=14)
# Apprise URLs every project's alerts go to, beside the targets set in the admin.
CONSOLE_NOTIFY_URLS = env.list("CONSOLE_NOTIFY_URLS", default=[])
CONSOLE_NOTIFY_ADMINS = env.bool("CONSOLE_NOTIFY_ADMINS", default=True)  # alerts also by email to ADMINS
# How people reach the console: the links in alert messages.
CONSOLE_BASE_URL = env.str("CONSOLE_BASE_URL", default="http://localhost:8000")
# Django's email (alerts to ADMINS): "Name <address>" or plain addresses, comma-separated.
ADMINS = [email.utils.parseaddr(a) for a in env.list("DJANGO_ADMINS", default=[])]
EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_HOST_USER = env.str("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env.str("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT", default=10)
SERVER_EMAIL = DEFAULT_FROM_EMAIL = env.str("DJANGO_SERVER_EMAIL", default="crawlhub@localhost")

# --- Logging (crawlproject/logconfig.py): plain lines by default; CRAWLHUB_LOG_FORMAT=json for production,
# where every line is one JSON object (with task_id, task and project_id inside Celery tasks).
from crawlproject.logconfig import LOG_FORMATS, logging_config  # noqa: E402 - needs nothing from Django

CRAWLHUB_LOG_FORMAT = env.str("CRAWLHUB_LOG_FORMAT", default="plain")
if CRAWLHUB_LOG_FORMAT not in LOG_FORMATS:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"CRAWLHUB_LOG_FORMAT must be plain or json, not {CRAWLHUB_LOG_FORMAT!r}")
LOGGING = logging_config(
    log_format=CRAWLHUB_LOG_FORMAT,
    root_level=env.str("LOG_LEVEL", default="WARNING"),
    crawlhub_level=env.str("CRAWLHUB_LOG_LEVEL", default="INFO"),
)
