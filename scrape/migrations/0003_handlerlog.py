import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("crawl", "0004_job_ids"),
        ("scrape", "0002_sinks"),
    ]

    operations = [
        migrations.CreateModel(
            name="HandlerLog",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("at", models.DateTimeField(help_text="When the handler logged it.")),
                ("level", models.CharField(help_text="DEBUG, INFO, WARNING, ERROR or CRITICAL.", max_length=10)),
                (
                    "message",
                    models.TextField(help_text="What it logged, or the traceback of the exception it raised."),
                ),
                (
                    "page",
                    models.ForeignKey(
                        help_text="The page parsed.",
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="handler_log_lines",
                        to="crawl.page",
                    ),
                ),
            ],
        ),
    ]
