"""Keep beat's PeriodicTask rows in step with the projects' recrawl schedules, and the pages' next
revisits with the projects' revisit settings; and the pipeline's one signal to whoever keeps runs."""

from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import Signal, receiver

from crawl.frontier.recrawl import pages_reschedule
from crawl.models import Project, ProjectProxy, Seed
from crawl.policy import config_stamp_move
from crawl.services.recrawl_schedules import schedule_sync, task_name

# Sent by beat's recrawl tick inside its transaction when pages of a project are due, before they
# are queued (kwargs: project_id). A receiver may answer with the id of the job they run as (the
# console makes the tick a job).
recrawl_due = Signal()

REVISIT_FIELDS = ("hub_revisit_seconds", "revisit_min_seconds", "revisit_max_seconds")
SCHEDULE_FIELDS = frozenset({"recrawl_every_minutes", "recrawl_crontab", "recrawl_mode", "status", *REVISIT_FIELDS})


@receiver(pre_save, sender=Project)
def project_saving(sender, instance: Project, update_fields=None, **kwargs) -> None:
    """Remember the revisit settings the row had, to see after the save whether they changed."""
    if instance.pk is None or (update_fields is not None and not set(REVISIT_FIELDS) & set(update_fields)):
        instance._revisit_before = None
        return
    instance._revisit_before = Project.objects.filter(pk=instance.pk).values_list(*REVISIT_FIELDS).first()


@receiver(post_save, sender=Project)
def project_saved(sender, instance: Project, update_fields=None, **kwargs) -> None:
    before = getattr(instance, "_revisit_before", None)
    if before is not None and before != tuple(getattr(instance, f) for f in REVISIT_FIELDS):
        pages_reschedule(project=instance)  # a shorter interval takes effect now, not at the old revisit
    if update_fields is not None and not SCHEDULE_FIELDS & set(update_fields):
        return  # a save of other fields (say, the token bucket) leaves beat alone
    schedule_sync(instance)


@receiver(post_save, sender=Seed)
@receiver(post_delete, sender=Seed)
def seed_changed(sender, instance: Seed, **kwargs) -> None:
    """A seed is configuration (it makes the default scope): its project's change stamp moves."""
    config_stamp_move(instance.project_id)


PROXY_POOL_FIELDS = frozenset({"active", "url", "project"})  # what decides whether a project has a pool


@receiver(post_save, sender=ProjectProxy)
@receiver(post_delete, sender=ProjectProxy)
def proxy_changed(sender, instance: ProjectProxy, update_fields=None, **kwargs) -> None:
    """A proxy added, deleted, turned on or off: its project's change stamp moves, so the fetch
    stage (fetch/proxy_pool.py) sees at its next round whether the project has a pool. A health
    update (update_fields without these) leaves it."""
    if update_fields is None or PROXY_POOL_FIELDS & set(update_fields):
        config_stamp_move(instance.project_id)


@receiver(post_delete, sender=Project)
def project_deleted(sender, instance: Project, **kwargs) -> None:
    from django_celery_beat.models import PeriodicTask

    PeriodicTask.objects.filter(name=task_name(instance)).delete()


# Sent by the fetch stage when it builds the requests of a project's pages, in the worker (kwargs:
# project). A receiver (the scrape app, for a spider with a sign() hook) may answer with a function
# (page, FetchRequest) -> FetchRequest run on each of them just before it is sent; what it raises
# fails that page.
request_signer = Signal()
