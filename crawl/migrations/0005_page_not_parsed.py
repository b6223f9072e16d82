"""Page.parsed (a response stored but not parsed is done, not failed), and the Project list fields'
validators. Lists are split on lines only from now on: host, extension and MIME type lists stored
comma-separated (read as lists before) get one item per line, so they keep their meaning."""

import crawl.validators
import django.core.validators
import re
from django.db import migrations, models


LIST_FIELDS = ("allowed_domains", "media_extensions", "media_mime_types")  # a comma is never part of an item


def commas_to_lines(apps, schema_editor):
    Project = apps.get_model("crawl", "Project")
    for project in Project.objects.all().only("id", *LIST_FIELDS):
        changed = {f: "\n".join(getattr(project, f).split(",")) for f in LIST_FIELDS if "," in getattr(project, f)}
        if changed:
            Project.objects.filter(id=project.id).update(**changed)


class Migration(migrations.Migration):

    dependencies = [
        ('crawl', '0004_job_ids'),
    ]

    operations = [
        migrations.AddField(
            model_name='page',
            name='parsed',
            field=models.BooleanField(db_default=True, default=True, help_text='False for a response stored but not parsed (not HTML, a listing or JSON API): done, not failed.'),
        ),
        migrations.AlterField(
            model_name='project',
            name='allow_patterns',
            field=models.TextField(blank=True, default='', help_text='Regexes, one per line; when set, a URL must match one to be crawled.', validators=[crawl.validators.regex_lines]),
        ),
        migrations.AlterField(
            model_name='project',
            name='allowed_domains',
            field=models.TextField(blank=True, default='', help_text='Hosts in scope, one per line (subdomains included). Empty: the hosts of the seeds.', validators=[crawl.validators.host_lines]),
        ),
        migrations.AlterField(
            model_name='project',
            name='deny_patterns',
            field=models.TextField(blank=True, default='', help_text='Regexes, one per line; a URL matching any is never crawled.', validators=[crawl.validators.regex_lines]),
        ),
        migrations.AlterField(
            model_name='project',
            name='gallery_page_patterns',
            field=models.TextField(blank=True, default='', help_text='Regexes, one per line: pages downloaded with gallery-dl, when the gallery-dl program is installed.', validators=[crawl.validators.regex_lines]),
        ),
        migrations.AlterField(
            model_name='project',
            name='media_extensions',
            field=models.TextField(blank=True, default='', help_text='Only these file extensions (e.g. .jpg, .mp4), one per line. Empty: any.', validators=[crawl.validators.extension_lines]),
        ),
        migrations.AlterField(
            model_name='project',
            name='media_kinds',
            field=models.CharField(default='image,video,audio', help_text='Kinds of media to download, comma-separated: image, video, audio, file.', max_length=100, validators=[django.core.validators.RegexValidator('^\\s*((image|video|audio|file)\\s*)?(,\\s*((image|video|audio|file)\\s*)?)*$', flags=re.RegexFlag['IGNORECASE'], message='Comma-separated media kinds, from: image, video, audio, file.')]),
        ),
        migrations.AlterField(
            model_name='project',
            name='media_mime_types',
            field=models.TextField(blank=True, default='', help_text='Only these MIME types (e.g. image/*, video/mp4), one per line. Empty: any.', validators=[crawl.validators.mime_type_lines]),
        ),
        migrations.AlterField(
            model_name='project',
            name='media_page_patterns',
            field=models.TextField(blank=True, default='', help_text='Regexes, one per line: pages whose URL matches are video/audio pages downloaded whole with yt-dlp.', validators=[crawl.validators.regex_lines]),
        ),
        migrations.RunPython(commas_to_lines, migrations.RunPython.noop),
    ]
