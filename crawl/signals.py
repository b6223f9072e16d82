"""Keep beat's PeriodicTask rows in step with the projects' recrawl schedules."""

from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from crawl.models import Project
from crawl.services.schedules import schedule_sync, task_name


@receiver(post_save, sender=Project)
def project_saved(sender, instance: Project, **kwargs) -> None:
    schedule_sync(instance)


@receiver(post_delete, sender=Project)
def project_deleted(sender, instance: Project, **kwargs) -> None:
    from django_celery_beat.models import PeriodicTask

    PeriodicTask.objects.filter(name=task_name(instance)).delete()
