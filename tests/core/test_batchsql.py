"""core/batchsql.py on the real PostgreSQL: the rows a batch write sends as one JSON document
(json_to_recordset) are stored exactly as the same rows sent as arrays (unnest), value for value."""

import datetime
import json
import uuid
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import Q
from django.forms.models import model_to_dict
from django.utils import timezone
from psycopg.types.json import Jsonb

from core import batchsql as db
from crawl.models import Page
from crawl.services.projects import project_get_or_create
from scrape.models import Item

AWKWARD = "quote ' double \" backslash \\ tab \t newline \n unicode é 漢字 emoji 🕷 percent %s %(x)s"


@pytest.fixture
def projects(db):
    return project_get_or_create(name="writes-json"), project_get_or_create(name="writes-arrays")


def pages_for(project, n: int = 3) -> list[Page]:
    when = timezone.now().replace(microsecond=123456)
    return [
        Page(
            project=project,
            url=f"http://site.test/{i}?q={AWKWARD}",
            url_key=f"key-{i}",
            host="site.test",
            depth=i,
            priority=-i,
            title=AWKWARD,
            next_fetch_at=when + datetime.timedelta(seconds=i),
            enqueued_at=when,
            request={"method": "POST", "body": AWKWARD, "nested": [1, 2.5, True, None, {"k": "v"}], "itag": "x"},
            lease_token=uuid.UUID(int=i) if i else None,
        )
        for i in range(n)
    ]


def stored(model, project) -> list[dict]:
    exclude = {"id", "project", "created_at", "updated_at", "discovered_from"}
    rows = model.objects.filter(project=project).order_by("id")
    return [{k: v for k, v in model_to_dict(r).items() if k not in exclude} for r in rows]


def insert_both_ways(monkeypatch, model, rows_json, rows_arrays, **kwargs):
    sent = []
    original = db._recordset_rows

    def recording(fields, chunk, conn):
        sent.append(original(fields, chunk, conn))
        return sent[-1]

    monkeypatch.setattr(db, "_recordset_rows", recording)
    db.insert_new_ids(model, rows_json, **kwargs)
    assert sent and all(s is not None and "json_to_recordset" in s[0] for s in sent)
    monkeypatch.setattr(db, "_recordset_rows", lambda fields, chunk, conn: None)  # the arrays path
    db.insert_new_ids(model, rows_arrays, **kwargs)


def test_a_json_document_stores_what_arrays_store(projects, monkeypatch):
    a, b = projects
    json_rows, array_rows = pages_for(a), pages_for(b)
    insert_both_ways(monkeypatch, Page, json_rows, array_rows, conflict_fields=("project", "url_key"))
    assert all(r.id for r in json_rows + array_rows)
    via_json, via_arrays = stored(Page, a), stored(Page, b)
    assert via_json == via_arrays
    assert via_json[2]["request"]["body"] == AWKWARD and via_json[0]["lease_token"] is None
    assert Page.objects.get(id=json_rows[1].id).next_fetch_at == json_rows[1].next_fetch_at  # microseconds kept


def test_only_new_rows_come_back_and_an_upsert_updates_in_place(projects):
    project, _ = projects
    first = pages_for(project, 2)
    db.insert_new_ids(Page, first, conflict_fields=("project", "url_key"))
    again = pages_for(project, 3)
    db.insert_new_ids(Page, again, conflict_fields=("project", "url_key"))
    assert [r.id for r in again[:2]] == [None, None] and again[2].id
    item = dict(project=project, page_id=first[0].id, kind="page", position=0, rule_version="1")
    db.upsert(
        Item, [Item(**item, data={"v": 1})], conflict_fields=("page", "kind", "position"), update_fields=("data",)
    )
    db.upsert(
        Item,
        [Item(**item, data="a JSON string")],
        conflict_fields=("page", "kind", "position"),
        update_fields=("data",),
    )
    assert Item.objects.get(page_id=first[0].id).data == "a JSON string"  # a jsonb string, not text
    with connection.cursor() as cursor:
        cursor.execute("SELECT jsonb_typeof(data) FROM scrape_item WHERE page_id = %s", [first[0].id])
        assert cursor.fetchone() == ("string",)


def test_values_without_a_json_form_go_as_arrays(projects):
    project, _ = projects
    [page] = pages_for(project, 1)
    db.insert_new_ids(Page, [page], conflict_fields=("project", "url_key"))
    fields = [f for f in Item._meta.concrete_fields if not f.primary_key]
    now = timezone.now()
    row = Item(project=project, page_id=page.id, kind="page", position=0, data={"score": float("nan")})
    row.created_at = row.updated_at = now
    assert db._recordset_rows(fields, [row], connection) is None  # NaN is not JSON
    with pytest.raises(db.NoJsonForm):
        db.json_value(Jsonb(None))  # JSON null would read back as SQL NULL
    with pytest.raises(db.NoJsonForm):
        db.json_value([1, 2])  # a type of its own (an array column)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("value", "pg_type"),
    [
        (b"\x00\xffzlib\x9c", "bytea"),
        (Decimal("12.50"), "numeric"),
        (uuid.UUID(int=7), "uuid"),
        (datetime.datetime(2026, 11, 24, 17, 0, 0, 654321, tzinfo=datetime.UTC), "timestamptz"),
        (datetime.date(2026, 2, 28), "date"),
        (AWKWARD, "text"),
        (-(2**62), "bigint"),
    ],
)
def test_every_prepared_type_reads_back_as_itself(value, pg_type):
    document = json.dumps([{"c0": db.json_value(value)}], ensure_ascii=False)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT c0 FROM json_to_recordset(%s::json) AS r(c0 {pg_type})", [document])
        got = cursor.fetchone()[0]
    assert (bytes(got) if isinstance(got, memoryview) else got) == value


PREPARED_VALUES = [
    None, 0, -(2**62), True, False, "", AWKWARD, 7.5, float("nan"), Decimal("3.25"), "12", 12.0, 1,
    {"a": [1, None, "x"]}, [], {}, [1, 2], "a JSON string",
    datetime.datetime(2026, 11, 24, 17, 0, 0, 654321, tzinfo=datetime.UTC), datetime.datetime(2026, 11, 24, 17, 0),
    datetime.date(2026, 2, 28), uuid.UUID(int=7), str(uuid.UUID(int=9)), b"bytes",
]  # fmt: skip


@pytest.mark.django_db
@pytest.mark.filterwarnings("ignore:DateTimeField .* received a naive datetime")
@pytest.mark.parametrize("model", [Page, Item])
def test_each_fields_shortcut_prepares_what_its_get_db_prep_save_prepares(model):
    """json_preparer's fast cases are exactly Django's chain: every field of the models the hot
    path inserts, with values of every type it may meet (and some it should not)."""

    def outcome(call, *args):
        try:
            return "value", call(*args)
        except Exception as exc:  # the same refusal counts as the same outcome
            return "refused", type(exc)

    for field in (f for f in model._meta.concrete_fields if not f.primary_key):
        prepare = db.json_preparer(field, connection.vendor)
        for value in PREPARED_VALUES:
            slow = outcome(lambda f, v: db.json_value(f.get_db_prep_save(v, connection)), field, value)
            fast = outcome(prepare, value, connection)
            assert fast == slow, (field.name, value)
            if fast[0] == "value":  # what the document carries (Django's ints are psycopg's Int4 and such)
                assert json.dumps(fast[1], default=repr) == json.dumps(slow[1], default=repr), (field.name, value)


def finish_rows(project, monkeypatch, *, case_form: bool) -> list[dict]:
    from django.db.models import F

    from crawl.frontier import leases

    rows = pages_for(project, 4)
    db.insert_new_ids(Page, rows, conflict_fields=("project", "url_key"))
    token, claimed = leases.lease_claim(Page, [r.id for r in rows], claimable=Q(state="queued"), state="leased")
    assert len(claimed) == 4
    ids = sorted(r.id for r in rows)
    changes = {
        ids[0]: {"state": "done", "title": AWKWARD, "status_code": 200, "request": {"a": [1, "x"]}, "priority": 5},
        ids[1]: {"state": "done", "title": "", "status_code": 404, "request": {}, "error_code": "http_404"},
        ids[2]: {"state": "done", "title": "t", "status_code": None, "request": {"b": None}},
        ids[3]: {"state": "done", "title": "t", "status_code": 301, "request": {}, "priority": -2},
    }
    for row in changes.values():
        row["attempts"] = F("attempts") + 10  # an expression every row shares
    taken = []
    if case_form:
        monkeypatch.setattr(leases, "_finish_from_json", lambda *a: None)
    else:
        original = leases._finish_from_json
        monkeypatch.setattr(leases, "_finish_from_json", lambda *a: taken.append(original(*a)) or taken[-1])
    written = leases.lease_finish(Page, token=token, from_state="leased", changes=changes)
    assert written == set(ids)
    assert taken == ([] if case_form else [set(ids)])  # the JSON form wrote them, or was not asked
    assert leases.lease_finish(Page, token=token, from_state="leased", changes=changes) == set()  # the lease is gone
    keep = ("state", "title", "status_code", "request", "priority", "error_code", "attempts", "lease_token")
    return [{k: v for k, v in r.items() if k in keep} for r in stored(Page, project)]


def test_finishing_leases_from_a_json_document_writes_what_case_branches_write(projects, monkeypatch):
    a, b = projects
    via_json = finish_rows(a, monkeypatch, case_form=False)
    via_case = finish_rows(b, monkeypatch, case_form=True)
    assert via_json == via_case
    assert [r["priority"] for r in via_json] == [5, -1, -2, -2]  # a row without the column keeps its own
    assert [r["attempts"] for r in via_json] == [11] * 4 and {r["lease_token"] for r in via_json} == {None}
