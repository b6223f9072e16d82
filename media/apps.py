"""App config for media."""

from django.apps import AppConfig


class MediaConfig(AppConfig):
    name = "media"
    label = "media"
    verbose_name = "Media"
