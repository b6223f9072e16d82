"""WSGI entry point (gunicorn crawlproject.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crawlproject.settings")
application = get_wsgi_application()
