"""scrape.jsonapi: records, schema errors and next pages from saved JSON API responses. No database, no network."""

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrape.jsonapi import ApiConfigError, ApiResult, compile_api_config, config_version

FIXTURES = Path(__file__).parents[1] / "fixtures" / "jsonapi"
API_URL = "https://shop.example.com/api/v1/products?page=1"
PRODUCT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["id", "name", "price"],
    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "price": {"type": "number"}},
}
PRODUCTS = {
    "records": "data.items",
    "fields": {"id": "id", "name": "attributes.name", "price": "attributes.price.amount", "first_tag": "tags.0"},
    "schema": PRODUCT_SCHEMA,
    "next": {"link": "links.next"},
}
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=5), children, max_size=5),
    max_leaves=30,
)


def extract_page(name: str, url: str, config: dict = PRODUCTS) -> ApiResult:
    return compile_api_config(config).extract((FIXTURES / name).read_bytes(), url, "application/json")


def body_of(document) -> bytes:
    return json.dumps(document).encode()


def test_it_keeps_valid_and_invalid_records_with_readable_errors():
    result = extract_page("products_page1.json", API_URL)

    assert result.error == ""
    assert result.records == [
        {"id": 1, "name": "Kettle", "price": 24.5, "first_tag": "kitchen"},
        {"id": 2, "name": "Toaster", "price": "abc", "first_tag": "kitchen"},
        {"id": 3, "name": "Lamp", "price": 12},
    ]
    assert result.errors == [[], ["price: 'abc' is not of type 'number'"], []]


def test_it_leaves_out_a_missing_field_and_reports_it_as_required():
    result = extract_page("products_page2.json", "https://shop.example.com/api/v1/products?page=2&sort=name")

    assert result.records[0] == {"id": 4, "name": "Chair", "first_tag": "furniture"}
    assert result.errors == [["'price' is a required property"], []]


def test_it_follows_next_links_to_the_last_page():
    pages = ["products_page1.json", "products_page2.json", "products_page3.json"]
    url, seen, records = API_URL, [], 0
    for page in pages:
        result = extract_page(page, url)
        records += len(result.records)
        url = result.next_url
        seen.append(url)

    assert seen == [
        "https://shop.example.com/api/v1/products?page=2&sort=name",
        "https://shop.example.com/api/v1/products?page=3&sort=name",
        None,
    ]
    assert records == 6


@pytest.mark.parametrize("link", [None, "", "   ", 42, "mailto:shop@example.com", API_URL])
def test_it_has_no_next_url_for_a_missing_unusable_or_self_link(link):
    config = compile_api_config({"records": "items", "next": {"link": "links.next"}})

    assert config.extract(body_of({"items": [{"a": 1}], "links": {"next": link}}), API_URL).next_url is None


def test_it_increments_the_page_param_keeping_other_params_in_order():
    config = compile_api_config({"records": "items", "next": {"param": "page", "start": 1}})
    body = body_of({"items": [{"a": 1}]})

    url = "https://api.example.com/v2/search?q=red%20shoes&page=4&sort=price,asc#top"
    assert config.extract(body, url).next_url == "https://api.example.com/v2/search?q=red%20shoes&page=5&sort=price,asc"
    first = "https://api.example.com/v2/search?q=shoes"
    assert config.extract(body, first).next_url == "https://api.example.com/v2/search?q=shoes&page=2"


def test_it_stops_param_pagination_on_an_empty_page():
    config = compile_api_config({"records": "items", "next": {"param": "page", "stop_when_empty": True}})
    url = "https://api.example.com/items?page=7"

    assert config.extract(body_of({"items": []}), url).next_url is None
    assert config.extract(b"<html>oops</html>", url).next_url is None
    assert config.extract(body_of({"items": [{"a": 1}]}), url).next_url == "https://api.example.com/items?page=8"


def test_it_goes_on_past_empty_pages_when_told_to():
    config = compile_api_config({"records": "items", "next": {"param": "page", "stop_when_empty": False}})

    result = config.extract(body_of({"items": []}), "https://api.example.com/items?page=7")

    assert result.next_url == "https://api.example.com/items?page=8"


def test_it_stops_param_pagination_at_max_pages():
    config = compile_api_config({"records": "items", "next": {"param": "offset_page", "start": 0, "max_pages": 3}})
    body = body_of({"items": [{"a": 1}]})

    urls = ["https://api.example.com/items"]
    while (next_url := config.extract(body, urls[-1]).next_url) is not None:
        urls.append(next_url)

    assert urls == [
        "https://api.example.com/items",
        "https://api.example.com/items?offset_page=1",
        "https://api.example.com/items?offset_page=2",
    ]


def test_it_reads_the_whole_document_as_one_record():
    config = compile_api_config(
        {"fields": {"station": "station", "temperature": "temperature.value", "wind_speed": "wind.0.speed"}}
    )

    result = config.extract((FIXTURES / "weather.json").read_bytes(), "https://api.example.com/weather/LFPG")

    assert result.records == [{"station": "LFPG", "temperature": 21.4, "wind_speed": 12}]
    assert result.errors == [[]]
    assert result.next_url is None


def test_it_keeps_whole_records_of_a_top_level_list_without_fields():
    result = compile_api_config({}).extract(body_of([{"a": 1}, {"b": [2]}]), API_URL)

    assert result.records == [{"a": 1}, {"b": [2]}]
    assert result.errors == [[], []]


def test_it_indexes_lists_with_integer_path_parts():
    config = compile_api_config({"records": "rows", "fields": {"id": "0", "name": "1", "first_alias": "2.0"}})

    result = config.extract(body_of({"rows": [[7, "Ada", ["ada", "al"]], [8, "Bo", []], [9]]}), API_URL)

    assert result.records == [{"id": 7, "name": "Ada", "first_alias": "ada"}, {"id": 8, "name": "Bo"}, {"id": 9}]


def test_it_keeps_a_record_that_is_not_an_object_with_an_error():
    result = compile_api_config({"records": "items"}).extract(body_of({"items": [{"a": 1}, 5]}), API_URL)

    assert result.records == [{"a": 1}, {"value": 5}]
    assert result.errors == [[], ["record is a number, not an object"]]


@pytest.mark.parametrize("body", [b"<!doctype html><p>Rate limited</p>", b"", b"  ", b"NaN", b"[1e999]", b'{"a": '])
def test_it_reports_a_body_that_is_not_json(body):
    result = compile_api_config(PRODUCTS).extract(body, API_URL, "text/html")

    assert result.error.startswith("not_json: ")
    assert result.records == []
    assert result.next_url is None


@pytest.mark.parametrize(
    ("document", "error"),
    [
        ({"data": {"results": []}}, "bad_records_path: 'data.items' not found"),
        ({"data": {"items": "none"}}, "bad_records_path: data.items is a string, not a list or an object"),
        ([{"id": 1}], "bad_records_path: 'data.items' not found"),
    ],
)
def test_it_reports_a_records_path_that_does_not_lead_to_records(document, error):
    result = compile_api_config(PRODUCTS).extract(body_of(document), API_URL)

    assert result.error == error
    assert result.records == []


def test_it_reports_a_scalar_document_as_a_bad_records_path():
    result = compile_api_config({}).extract(b'"just a string"', API_URL)

    assert result.error == "bad_records_path: the document is a string, not a list or an object"


def test_it_decodes_utf8_or_utf16_and_falls_back_to_the_declared_charset():
    config = compile_api_config({"fields": {"city": "city"}})
    document = {"city": "Zürich"}

    assert config.extract(b"\xef\xbb\xbf" + body_of(document), API_URL).records == [document]
    latin1 = '{"city": "Zürich"}'.encode("latin-1")
    assert config.extract(latin1, API_URL, "application/json; charset=ISO-8859-1").records == [document]
    assert config.extract('{"city": "Zürich"}'.encode("utf-16"), API_URL).records == [document]
    assert config.extract('{"city": "Zürich"}'.encode("utf-16-le"), API_URL).records == [document]


def test_it_caps_the_number_of_records_and_says_so():
    config = compile_api_config({"records": "items"}, max_records=3)

    result = config.extract(body_of({"items": [{"n": n} for n in range(5)]}), API_URL)

    assert result.records == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert len(result.errors) == 3
    assert (result.total, result.truncated) == (5, True)


def test_it_validates_against_draft_7_schemas():
    # Draft 7's array form of "items" (2020-12 calls it "prefixItems" and rejects this schema).
    pair = {"items": [{"type": "string"}]}
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"pair": pair}}
    config = compile_api_config({"records": "items", "schema": schema})

    result = config.extract(body_of({"items": [{"pair": ["a", 1]}, {"pair": [2]}]}), API_URL)

    assert result.errors == [[], ["pair.0: 2 is not of type 'string'"]]


def test_it_never_fetches_remote_schema_references():
    schema = {"properties": {"price": {"$ref": "https://schemas.example.com/price.json"}}}
    config = compile_api_config({"schema": schema})

    result = config.extract(body_of({"price": 3}), API_URL)

    assert result.records == [{"price": 3}]
    assert result.errors[0][0].startswith("schema: cannot validate: ")


def test_it_rejects_an_invalid_schema_with_a_message():
    schema = {"type": "object", "properties": {"price": {"type": "numbr"}}}

    with pytest.raises(ApiConfigError, match=r"schema: invalid JSON Schema at properties\.price\.type: 'numbr'"):
        compile_api_config({**PRODUCTS, "schema": schema})
    with pytest.raises(ApiConfigError, match=r"schema: invalid JSON Schema at properties\.pair\.items: "):
        compile_api_config({"schema": {"properties": {"pair": {"items": [{"type": "string"}]}}}})


def test_it_rejects_unknown_config_keys():
    with pytest.raises(ApiConfigError, match="config: unknown key 'record'; allowed: records, fields, schema, next"):
        compile_api_config({"record": "data.items"})
    with pytest.raises(ApiConfigError, match="next: unknown key 'stop'"):
        compile_api_config({"next": {"param": "page", "stop": True}})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ([], "config: must be a JSON object"),
        ({"records": "data..items"}, "records: 'data..items' has an empty part"),
        ({"records": 3}, "records: a path must be a non-empty string"),
        ({"fields": {"name": ""}}, "fields.name: a path must be a non-empty string"),
        ({"fields": {}}, "fields: must map output names to paths"),
        ({"fields": ["id"]}, "fields: must map output names to paths"),
        ({"schema": "object"}, "schema: must be a JSON Schema"),
        ({"schema": {"$schema": "https://example.com/my-draft"}}, "schema: unknown \\$schema"),
        ({"next": {}}, "next: needs either 'link'"),
        ({"next": {"link": "a", "param": "page"}}, "next: needs either 'link'"),
        ({"next": {"link": ".next"}}, "next.link: '.next' has an empty part"),
        ({"next": {"param": ""}}, "next.param: must be a query parameter name"),
        ({"next": {"param": "page", "start": "1"}}, "next.start: must be an integer"),
        ({"next": {"param": "page", "stop_when_empty": 1}}, "next.stop_when_empty: must be true or false"),
        ({"next": {"param": "page", "max_pages": 0}}, "next.max_pages: must be a positive integer"),
    ],
)
def test_it_rejects_bad_paths_and_next_specs(config, message):
    with pytest.raises(ApiConfigError, match=message):
        compile_api_config(config)


def test_it_hashes_the_config_stably():
    reordered = dict(reversed(list(PRODUCTS.items())))

    assert config_version(PRODUCTS) == config_version(reordered)
    assert len(config_version(PRODUCTS)) == 12
    assert int(config_version(PRODUCTS), 16) >= 0
    assert config_version(PRODUCTS) != config_version({**PRODUCTS, "records": "data.rows"})


@given(body=st.binary(max_size=2000), content_type=st.text(max_size=40), url=st.text(max_size=60))
def test_it_never_raises_on_arbitrary_bytes(body, content_type, url):
    result = compile_api_config(PRODUCTS).extract(body, url, content_type)

    assert len(result.records) == len(result.errors)


@given(document=JSON_VALUES, page=st.integers())
def test_it_never_raises_on_arbitrary_json(document, page):
    for config in (PRODUCTS, {}, {"records": "0", "next": {"param": "page", "stop_when_empty": False}}):
        result = compile_api_config(config).extract(body_of(document), f"https://api.example.com/x?page={page}")

        assert len(result.records) == len(result.errors)
        assert all(isinstance(record, dict) for record in result.records)
