# crawlhub production image: one image for web (gunicorn), the three Celery workers, beat and flower.
# docker-compose.yml picks the process per service; the default CMD runs the web server.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    DJANGO_SETTINGS_MODULE=crawlproject.settings \
    CRAWLHUB_VAR_DIR=/app/var \
    XDG_CACHE_HOME=/app/var/cache

# ffmpeg: media downloads (yt-dlp merges and HLS need it).
# chromium: JavaScript rendering (core/net/browser.py drives it with Playwright; never `playwright install`).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ffmpeg chromium \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app

# Dependencies first, so code changes do not reinstall them.
COPY requirements/ requirements/
RUN pip install --no-cache-dir -r requirements/prod.txt

# The unprivileged user the processes run as. /app/var is created here and owned by it, so a named
# volume mounted there starts out writable (Docker copies the owner into an empty volume).
RUN groupadd --system --gid 10001 crawlhub \
    && useradd --system --uid 10001 --gid crawlhub --home-dir /app --no-create-home --shell /usr/sbin/nologin crawlhub \
    && mkdir -p /app/var \
    && chown crawlhub:crawlhub /app/var

COPY . .

USER crawlhub

EXPOSE 8000

# crawlproject/gunicorn_conf.py: bind, timeout, access log, JSON log lines with CRAWLHUB_LOG_FORMAT=json.
# WEB_CONCURRENCY (gunicorn's own variable) sets the number of gunicorn workers; GUNICORN_CMD_ARGS adds options.
CMD ["gunicorn", "-c", "python:crawlproject.gunicorn_conf", "crawlproject.wsgi"]
