"""New projects get a depth and a per-host page cap (CRAWL_DEFAULT_MAX_DEPTH, CRAWL_DEFAULT_MAX_PAGES_PER_HOST)
so that a URL trap ends on its own. Existing projects keep the values they have: empty stays no limit."""

import crawl.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('crawl', '0005_page_not_parsed'),
    ]

    operations = [
        migrations.AlterField(
            model_name='project',
            name='max_depth',
            field=models.PositiveIntegerField(blank=True, default=crawl.models.default_max_depth, help_text='Links followed at most this many hops from a seed (0: the seeds only). Empty: no limit. New projects get CRAWL_DEFAULT_MAX_DEPTH (50 unless set), so an endless chain of links stops.', null=True),
        ),
        migrations.AlterField(
            model_name='project',
            name='max_pages_per_host',
            field=models.PositiveIntegerField(blank=True, default=crawl.models.default_max_pages_per_host, help_text="At most this many URLs of any one host, seeds aside (a crawler trap's budget; 0: the seeds only). Empty: no limit. New projects get CRAWL_DEFAULT_MAX_PAGES_PER_HOST (100,000 unless set).", null=True),
        ),
    ]
