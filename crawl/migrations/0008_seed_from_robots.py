"""Seeds named by robots.txt Sitemap: lines are marked: capped on their own, and kept out of the
project's change form."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('crawl', '0007_fetch_pull'),
    ]

    operations = [
        migrations.AddField(
            model_name='seed',
            name='from_robots',
            field=models.BooleanField(default=False, help_text='Named by a robots.txt Sitemap: line, not entered by a person.'),
        ),
    ]
