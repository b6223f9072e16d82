"""The Python API checks seeds when they are added, as the API, the admin and the crawl command do:
a metadata or internal address is refused with the reason, and nothing of the call is added."""

import pytest

import crawlhub
from crawl.models import Page, Seed
from crawl.services.projects import project_get_or_create

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "url",
    ["http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:9/", "http://10.0.0.1/", "ftp://example.com/"],
)
def test_add_seeds_refuses_what_the_crawler_refuses_and_adds_nothing(url):
    project = project_get_or_create(name="checked")
    with pytest.raises(ValueError, match="seeds refused") as refused:
        crawlhub.add_seeds(project, ["http://93.184.215.14/fine", url])
    assert url in str(refused.value)
    assert not Seed.objects.filter(project=project).exists() and not Page.objects.filter(project=project).exists()


def test_add_seeds_takes_internal_addresses_of_a_project_that_allows_them_but_never_metadata():
    project = project_get_or_create(name="intranet", allow_private=True)
    assert crawlhub.add_seeds(project, ["http://10.0.0.1/"]) == 1
    with pytest.raises(ValueError, match="metadata"):
        crawlhub.add_seeds(project, ["http://169.254.169.254/"])
