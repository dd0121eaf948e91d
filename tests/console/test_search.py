"""The console's search without a cluster (broker/rest/search.py): the filter's body and its test of a record, the
JSON path subset, a fetched chunk scanned within bounds, and several partitions' pages merged with the cursor each
continues from, so that paging neither skips nor repeats a match."""

from __future__ import annotations

import json
from typing import Any

import pytest

from odradek.broker.rest import bodies, search
from odradek.broker.rest.errors import RestError
from odradek.broker.rest.requests import SearchFilter
from odradek.client.record.batch import Record
from odradek.client.record.builder import BatchBuilder


def record(offset: int, key: bytes | None = None, value: bytes | None = None, headers: Any = ()) -> Record:
    return Record(offset, 1000 + offset, key, value, tuple(headers))


def chunk(base_offset: int, values: list[tuple[bytes | None, bytes | None]], per_batch: int = 3) -> bytes:
    """Batches of ``per_batch`` records from ``base_offset``, as a fetch answers them."""
    out = b""
    for first in range(0, len(values), per_batch):
        builder = BatchBuilder(base_offset=base_offset + first)
        for key, value in values[first : first + per_batch]:
            builder.append(5000, key, value, [("h", key)] if key else [])
        out += builder.build()
    return out


def test_json_paths_name_members_and_elements() -> None:
    assert search.json_path("$") == ()
    assert search.json_path("$.order.items[2].sku") == ("order", "items", 2, "sku")
    assert search.json_path("$['odd key'].x['it\\'s']") == ("odd key", "x", "it's")
    document = {"order": {"items": [{}, {}, {"sku": "A-1"}]}, "n": None}
    assert search.at_path(document, ("order", "items", 2, "sku")) == "A-1"
    assert search.at_path(document, ("n",)) is None
    assert search.at_path(document, ("order", "items", 3)) is search._MISSING
    assert search.at_path(document, ("order", 0)) is search._MISSING
    for bad in ("order.id", "$.a..b", "$[*]", "$.a[-1]", "$.a[?(@.b)]"):
        with pytest.raises(RestError) as refused:
            search.json_path(bad)
        assert refused.value.status == 400


def test_each_condition_of_a_filter_must_hold() -> None:
    assert search.matcher(SearchFilter()) is None
    order = record(1, b"order-17", b'{"item": "book", "qty": 2, "tags": ["gift"]}', [("source", b"web")])
    other = record(2, b"order-18", b"not json", [("source", b"batch"), ("empty", None)])
    cases: list[tuple[dict[str, Any], list[Record]]] = [
        ({"key": "order-17"}, [order]),
        ({"key": "order"}, []),
        ({"value_contains": "book"}, [order]),
        ({"value_contains": "json"}, [other]),
        ({"header": "source"}, [order, other]),
        ({"header": "source", "header_value": "web"}, [order]),
        ({"header": "empty"}, [other]),
        ({"json_path": "$.qty"}, [order]),
        ({"json_path": "$.qty", "json_value": 2}, [order]),
        ({"json_path": "$.qty", "json_value": "2"}, []),
        ({"json_path": "$.tags", "json_value": ["gift"]}, [order]),
        ({"json_path": "$.missing", "json_value": None}, []),
        ({"key": "order-17", "header": "source", "header_value": "batch"}, []),
    ]
    for given, wanted in cases:
        test = search.matcher(bodies.search_filter(given))
        assert test is not None
        assert [r for r in (order, other) if test(r)] == wanted, given
    null_value = search.matcher(bodies.search_filter({"value_contains": "x"}))
    assert null_value is not None and not null_value(record(3))


@pytest.mark.parametrize(
    "body",
    [
        {"filter": {"json_value": 1}},
        {"filter": {"header_value": "x"}},
        {"filter": {"key": 1}},
        {"filter": {"nope": 1}},
        {"filter": []},
        {"start": "middle"},
        {"start": "offset"},
        {"start": "timestamp"},
        {"max_matches": 0},
        {"max_matches": 1001},
        {"max_scanned": 10_000_001},
        {"timeout_ms": 60_001},
        {"partitions": [-1]},
        {"cursor": [{"partition_id": 0}]},
        {"other": True},
    ],
)
def test_a_bad_search_is_refused_with_400(body: dict[str, Any]) -> None:
    with pytest.raises(RestError) as refused:
        bodies.search_records("t", json.dumps(body).encode())
    assert refused.value.status == 400


def test_a_search_body() -> None:
    found = bodies.search_records(
        "t",
        json.dumps(
            {
                "partitions": [1, 0],
                "start": "timestamp",
                "timestamp": "2026-01-01T00:00:00Z",
                "cursor": [{"partition_id": 1, "offset": 7}],
                "filter": {"key": "k", "json_path": "$.a", "json_value": {"b": [1, 2]}},
                "max_matches": 5,
                "max_scanned": 1_000_000,
                "decode": True,
            }
        ).encode(),
    )
    assert (found.partitions, found.start, found.timestamp_ms, found.cursor) == (
        (1, 0),
        "timestamp",
        1767225600000,
        ((1, 7),),
    )
    assert found.filter == SearchFilter(key=b"k", json_path=("a",), json_value='{"b":[1,2]}')
    assert (found.max_matches, found.max_scanned, found.timeout_ms, found.decode) == (5, 1_000_000, 10_000, True)
    default = bodies.search_records("t", b"{}")
    assert (default.start, default.max_matches, default.partitions, default.filter) == (
        "earliest",
        100,
        None,
        SearchFilter(),
    )


def test_a_chunk_is_scanned_from_its_start_to_its_end() -> None:
    values = [(f"k{i}".encode(), b"hit" if i % 4 == 0 else b"miss") for i in range(10)]
    data = chunk(100, values)
    test = search.matcher(SearchFilter(value_contains=b"hit"))
    everything = search.scan(data, 100, 110, test, 100, 100)
    assert [r.offset for r in everything.matches] == [100, 104, 108]
    assert (everything.scanned, everything.next_offset, everything.bounded) == (10, 110, False)
    # From the middle of a batch, up to an end inside another: the records outside are not looked at.
    middle = search.scan(data, 102, 107, test, 100, 100)
    assert [r.offset for r in middle.matches] == [104] and (middle.scanned, middle.next_offset) == (5, 107)
    # Bounded by matches: the scan stops just past the last one kept.
    first = search.scan(data, 100, 110, test, 2, 100)
    assert [r.offset for r in first.matches] == [100, 104] and (first.next_offset, first.bounded) == (105, True)
    # Bounded by records scanned.
    few = search.scan(data, 100, 110, None, 100, 3)
    assert [r.offset for r in few.matches] == [100, 101, 102] and (few.next_offset, few.bounded) == (103, True)
    # A chunk ending before the end: the scan goes on from past its last batch.
    short = search.scan(chunk(0, values[:4]), 0, 50, None, 100, 100)
    assert (short.scanned, short.next_offset, short.bounded) == (4, 4, False)


def test_transaction_markers_are_passed_over() -> None:
    marker = BatchBuilder(base_offset=3, is_control=True)
    marker.append(5000, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")
    data = chunk(0, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]) + marker.build() + chunk(4, [(b"d", b"4")])
    found = search.scan(data, 0, 5, None, 100, 100)
    assert [r.offset for r in found.matches] == [0, 1, 2, 4] and (found.scanned, found.next_offset) == (4, 5)


def test_budgets_split_evenly() -> None:
    assert search.shares(10, 3) == [4, 3, 3]
    assert search.shares(2, 3) == [1, 1, 1]
    assert search.scope_of("0,2", "500") == ((0, 2), 500)
    assert search.scope_of(None, "5") is None
    headers = dict(search.forwarded_scope([1, 3], 7))
    assert search.scope_of(headers[search.PARTITIONS_HEADER], headers[search.BUDGET_HEADER]) == ((1, 3), 7)
    with pytest.raises(RestError):
        search.scope_of("a,b", "1")


def _page(partition: int, offsets: list[int], next_offset: int, end: int, stopped: str = "end") -> dict[str, Any]:
    found = [search.found_record(partition, Record(o, 1000 + o * 10 + partition, b"k", b"v", ())) for o in offsets]
    state = search.PartitionScan(partition, next_offset, end, len(offsets))
    return search.page("t", "c", [state], found, stopped, 5)


def test_pages_merge_in_time_order_and_the_cursor_resumes_at_the_first_match_left_out() -> None:
    zero = _page(0, [0, 1, 2], 3, 10, "max_matches")
    one = _page(1, [0, 1], 2, 2)
    merged = search.merge([zero, one], 3)
    assert [(r["partition_id"], r["offset"]) for r in merged["data"]] == [(0, 0), (1, 0), (0, 1)]
    assert merged["cursor"] == [{"partition_id": 0, "offset": 2}, {"partition_id": 1, "offset": 1}]
    assert merged["stopped"] == "max_matches" and merged["scanned"] == 5
    # The next page, from the cursor, returns exactly the matches left out (and then those after them).
    again = search.merge([_page(0, [2], 3, 10, "max_scanned"), _page(1, [1], 2, 2)], 3)
    assert [(r["partition_id"], r["offset"]) for r in again["data"]] == [(1, 1), (0, 2)]
    assert again["cursor"] == [{"partition_id": 0, "offset": 3}] and again["stopped"] == "max_scanned"
    done = search.merge([_page(0, [], 10, 10), _page(1, [], 2, 2)], 3)
    assert done["cursor"] is None and done["stopped"] == "end" and done["data"] == []


def test_a_match_keeps_its_exact_bytes() -> None:
    found = search.found_record(2, Record(7, 1_700_000_000_123, b"\x00\xff", None, (("h", b"\x01"), ("n", None))))
    assert found == {
        "partition_id": 2,
        "offset": 7,
        "timestamp": "2023-11-14T22:13:20.123Z",
        "timestamp_ms": 1_700_000_000_123,
        "key": "AP8=",
        "value": None,
        "headers": [{"name": "h", "value": "AQ=="}, {"name": "n", "value": None}],
    }
