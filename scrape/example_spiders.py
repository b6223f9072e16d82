"""An example spider to copy: two routes that handle two kinds of page of a shop differently.

Load it (or your own module, written the same way) by dotted path with
scrape.spiders.load_spider_modules(["scrape.example_spiders"]), then get_spider("example-shop").

The markup it expects:
    category page (URL contains /category/): <h1>Name</h1> ... <a class="product" href="...">
    product page (URL contains /product/):   <h1>Title</h1> <span class="price">$1,299.00</span>
                                              <img class="product-image" src="...">
"""

import re
from collections.abc import Iterator

from .spiders import Follow, Media, Response, Spider, register, route

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
