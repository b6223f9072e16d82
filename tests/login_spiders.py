"""A spider that logs into a site's form, for the session tests (tests/scrape/test_login_crawl.py)."""

from scrape.spiders import Follow, Request, Spider, register, route

USER, PASSWORD = "ada", "correct horse"


@register
class LoginSpider(Spider):
    name = "login-test"

    @route(r"/login$")
    def login(self, response):
        form = response.xpath("//form[@id='login']")[0]
        fields = {field.get("name"): field.get("value", "") for field in form.xpath(".//input[@name]")}
        fields |= {"user": USER, "password": PASSWORD}
        yield Request(response.urljoin(form.get("action")), method="POST", data=fields, route="members")

    @route(r"/members/")
    def members(self, response):
        for href in response.xpath("//a/@href"):
            yield Follow(href)
        secret = response.xpath("string(//p[@class='secret'])")
        if secret:
            yield {"secret": secret}
