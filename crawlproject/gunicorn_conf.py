"""gunicorn settings of the web service: `gunicorn -c python:crawlproject.gunicorn_conf crawlproject.wsgi`.

Access log on stdout; with CRAWLHUB_LOG_FORMAT=json gunicorn's own lines are JSON objects like every other
log line. WEB_CONCURRENCY (workers) and GUNICORN_CMD_ARGS (anything else) still apply.
"""

import os

from crawlproject.logconfig import gunicorn_logconfig

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
timeout = 60
accesslog = "-"
logconfig_dict = gunicorn_logconfig(log_format=os.environ.get("CRAWLHUB_LOG_FORMAT", "plain"))
