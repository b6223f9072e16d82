"""Projects on the real database: a new project's default caps (depth, pages per host), and the
pattern lists of its scope, one regular expression per line, validated by the model."""

import pytest
from django.core.exceptions import ValidationError

from core.canonical import parse_lines
from crawl.frontier.discovery import project_scope
from crawl.models import Project
from crawl.services.projects import project_get_or_create


def test_a_pattern_with_a_comma_stays_one_pattern_in_the_crawl_scope(db):
    project = Project.objects.create(name="p", slug="p", allowed_domains="a.test", allow_patterns=r"/p\d{1,3}\.html")
    assert parse_lines("/a/\n/p\\d{1,3}\\.html\r\n\n") == ["/a/", r"/p\d{1,3}\.html"]
    scope = project_scope(project)
    assert scope.rejects("http://a.test/p12.html", 0) is None
    assert scope.rejects("http://a.test/p1234.html", 0) == "not_allowed"


def test_the_model_refuses_a_bad_regex_naming_its_line():
    project = Project(name="bad", slug="bad", deny_patterns="/ok/\n\n(unclosed")
    with pytest.raises(ValidationError) as refused:
        project.full_clean(validate_unique=False)
    (message,) = refused.value.message_dict["deny_patterns"]
    assert message.startswith("line 3: '(unclosed' is not a regular expression: missing ), unterminated subpattern")


def test_new_projects_get_the_default_caps_and_zero_means_none(db, settings):
    assert (Project._meta.get_field("max_depth").default(), settings.CRAWL_DEFAULT_MAX_DEPTH) == (50, 50)
    project = project_get_or_create(name="capped")
    assert (project.max_depth, project.max_pages_per_host) == (50, 100_000)
    settings.CRAWL_DEFAULT_MAX_DEPTH, settings.CRAWL_DEFAULT_MAX_PAGES_PER_HOST = 0, 7
    other = project_get_or_create(name="uncapped")
    assert (other.max_depth, other.max_pages_per_host) == (None, 7)
    assert project_get_or_create(name="capped", max_depth=500).max_depth == 500, "a project raises its cap"
