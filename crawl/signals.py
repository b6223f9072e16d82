"""Keep beat's PeriodicTask rows in step with the projects' recrawl schedules."""

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from crawl.models import Project
from crawl.services.schedules import schedule_sync, task_name

SCHEDULE_FIELDS = frozenset({"recrawl_every_minutes", "recrawl_crontab", "status"})


@receiver(post_save, sender=Project)
def project_saved(sender, instance: Project, update_fields=None, **kwargs) -> None:
    if update_fields is not None and not SCHEDULE_FIELDS & set(update_fields):
        return  # a save of other fields (say, the token bucket) leaves beat alone
    schedule_sync(instance)


@receiver(post_delete, sender=Project)
def project_deleted(sender, instance: Project, **kwargs) -> None:
    from django_celery_beat.models import PeriodicTask

    PeriodicTask.objects.filter(name=task_name(instance)).delete()
