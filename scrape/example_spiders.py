"""Example spiders to copy. "example-shop": two routes that handle two kinds of page of a shop
differently. "example-api": a page whose results come from a JSON API it POSTs to.

Load them (or your own module, written the same way) by dotted path with
scrape.spiders.load_spider_modules(["scrape.example_spiders"]), then get_spider("example-shop").

The markup example-shop expects:
    category page (URL contains /category/): <h1>Name</h1> ... <a class="product" href="...">
    product page (URL contains /product/):   <h1>Title</h1> <span class="price">$1,299.00</span>
                                              <img class="product-image" src="...">
"""

import re
from collections.abc import Iterator

from .spiders import Follow, Media, Request, Response, Spider, register, route

_PRICE = re.compile(r"\d+(?:[.,]\d+)*")


def _first_text(response: Response, selector: str) -> str:
    elements = response.css(selector)
    return " ".join(elements[0].text_content().split()) if elements else ""


def _price(text: str) -> float | None:
    """19.99, $1,299.00 and "1299" read as numbers; commas are taken as thousands separators."""
    match = _PRICE.search(text)
    return float(match.group().replace(",", "")) if match else None


@register
class ExampleShopSpider(Spider):
    name = "example-shop"

    @route(r"/category/")
    def category(self, response: Response) -> Iterator[dict | Follow]:
        hrefs = list(dict.fromkeys(a.get("href") for a in response.css("a.product[href]")))
        for href in hrefs:
            yield Follow(href)
        yield {"kind": "category", "name": _first_text(response, "h1"), "products": len(hrefs)}

    @route(r"/product/")
    def product(self, response: Response) -> Iterator[dict | Media]:
        price = _price(_first_text(response, ".price"))
        yield {"kind": "product", "title": _first_text(response, "h1"), "price": price}
        for image in response.css("img.product-image[src]")[:1]:
            yield Media(image.get("src"), kind="image")


@register
class ExampleApiSpider(Spider):
    """A search page names its queries and the API that answers them; the spider POSTs each query
    as JSON, with the API key as a header, and routes the answer (whose URL has no @route) to
    `results` with the query as meta. Two queries are two requests, and two rows, of one URL.

    The markup it expects on a search page (URL contains /search):
        <form class="search" data-api="/api/search" data-key="KEY"><input name="q" value="lamps"></form>
    and the API answers {"results": [{"title": "...", "price": 12.5}, ...]}.
    """

    name = "example-api"

    @route(r"/search")
    def search(self, response: Response) -> Iterator[Request]:
        for form in response.soup.select("form.search[data-api]"):
            query_input = form.find("input", attrs={"name": "q"})
            query = query_input.get("value", "") if query_input else ""
            self.log.info("asking %s for %r", form["data-api"], query)
            yield Request(
                form["data-api"],
                method="POST",
                json={"q": query},
                headers={"X-Api-Key": form.get("data-key", "")},
                route=self.results,
                meta={"query": query},
            )

    def results(self, response: Response) -> Iterator[dict]:
        hits = response.json().get("results", [])
        self.log.info("%d results for %r", len(hits), response.meta["query"])
        for rank, hit in enumerate(hits, 1):
            yield {"kind": "result", "query": response.meta["query"], "rank": rank, **hit}
