"""A spider for the frontier's poison-work tests: it follows every link, and on chosen pages yields
an item no database can store, or kills the process extracting it."""

import os
import signal

from scrape.spiders import Follow, Response, Spider, register, route


@register
class PoisonSpider(Spider):
    name = "poison-test"

    @route(r".*")
    def any_page(self, response: Response):
        if response.url.endswith("/kill.html"):
            os.kill(os.getpid(), signal.SIGKILL)  # an extraction that takes its worker down every time
        if response.url.endswith("/unstorable.html"):
            yield {"tags": {"a set", "is not JSON"}}
        for link in response.css("a[href]"):
            yield Follow(link.get("href"))
        yield {"url": response.url}
