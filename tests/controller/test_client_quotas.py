"""AlterClientQuotas and DescribeClientQuotas decided against an image: records only for what changes, every kind of
bad input refused with INVALID_REQUEST naming it and nothing stored, and the filter's exact/default/any matching."""

from __future__ import annotations

import pytest
from controller_images import apply, build

from odradek.client.common.metadata_image import MetadataImage
from odradek.client.errors import ErrorCode, InvalidRequestError
from odradek.client.quotas import QuotaEntity
from odradek.controller.client_quotas import (
    CLIENT_ID,
    USER,
    Alteration,
    Component,
    FilterComponent,
    QuotaOp,
    alter_client_quotas,
    components_of,
    describe_client_quotas,
    entity_of,
)

ALICE = [Component(USER, "alice")]
ALICE_APP = [Component(USER, "alice"), Component(CLIENT_ID, "app")]
DEFAULT_CLIENT = [Component(CLIENT_ID, None)]


def alter(img: MetadataImage, *alterations: Alteration) -> tuple[list, MetadataImage]:
    results = alter_client_quotas(img, alterations)
    return results, apply(img, [r for out in results for r in out.records])


def test_set_change_and_remove_write_records_only_for_what_changes() -> None:
    img = build()
    results, img = alter(
        img,
        Alteration(ALICE, [QuotaOp("producer_byte_rate", 1024), QuotaOp("request_percentage", 12.5)]),
        Alteration(DEFAULT_CLIENT, [QuotaOp("consumer_byte_rate", 2048)]),
    )
    assert [r.error for r in results] == [ErrorCode.NONE, ErrorCode.NONE]
    assert dict(img.client_quotas) == {
        (None, False, None, True): {"consumer_byte_rate": 2048.0},
        ("alice", False, None, False): {"producer_byte_rate": 1024.0, "request_percentage": 12.5},
    }
    # The same value again: no record. A removal of a key not set: no record, no error.
    [same] = alter_client_quotas(img, [Alteration(ALICE, [QuotaOp("producer_byte_rate", 1024)])])
    [absent] = alter_client_quotas(img, [Alteration(ALICE, [QuotaOp("consumer_byte_rate", remove=True)])])
    assert (same.error, same.records, absent.error, absent.records) == (ErrorCode.NONE, [], ErrorCode.NONE, [])
    # Removing an entity's last key removes the entity.
    ops = [QuotaOp("producer_byte_rate", remove=True), QuotaOp("request_percentage", remove=True)]
    _, img = alter(img, Alteration(ALICE, ops))
    assert dict(img.client_quotas) == {(None, False, None, True): {"consumer_byte_rate": 2048.0}}


@pytest.mark.parametrize(
    ("components", "ops", "named"),
    [
        (ALICE, [QuotaOp("producer_byte_rate", -5)], "producer_byte_rate"),
        (ALICE, [QuotaOp("producer_byte_rate", 0)], "positive"),
        (ALICE, [QuotaOp("consumer_byte_rate", 10.5)], "whole number"),
        (ALICE, [QuotaOp("request_percentage", float("nan"))], "request_percentage"),
        (ALICE, [QuotaOp("request_percentage", float("inf"))], "request_percentage"),
        (ALICE, [QuotaOp("fetch_rate", 5)], "'fetch_rate'"),
        (ALICE, [QuotaOp("fetch_rate", remove=True)], "'fetch_rate'"),
        (ALICE, [QuotaOp("producer_byte_rate", 5), QuotaOp("producer_byte_rate", remove=True)], "twice"),
        ([], [QuotaOp("producer_byte_rate", 5)], "empty quota entity"),
        ([Component("ip", "10.0.0.1")], [QuotaOp("producer_byte_rate", 5)], "'ip'"),
        ([Component(USER, "a"), Component(USER, "b")], [QuotaOp("producer_byte_rate", 5)], "'user' given twice"),
        ([Component(USER, "")], [QuotaOp("producer_byte_rate", 5)], "must not be empty"),
    ],
)
def test_bad_input_is_refused_naming_it_and_the_entry_stores_nothing(components, ops, named) -> None:
    """With a valid op in the same entry, which is not stored either; beside a valid entry, which is: entries are
    independent."""
    good = Alteration(DEFAULT_CLIENT, [QuotaOp("producer_byte_rate", 100)])
    bad_ops = [QuotaOp("request_percentage", 7)] * all(o.key != "request_percentage" for o in ops) + ops
    results, img = alter(build(), Alteration(components, bad_ops), good)
    assert results[0].error == ErrorCode.INVALID_REQUEST and named in results[0].message, results[0].message
    assert results[0].records == []
    assert results[1].error == ErrorCode.NONE
    assert dict(img.client_quotas) == {(None, False, None, True): {"producer_byte_rate": 100.0}}


def test_an_entity_altered_twice_in_one_request_is_refused_the_second_time() -> None:
    results, img = alter(
        build(),
        Alteration(ALICE_APP, [QuotaOp("producer_byte_rate", 1)]),
        Alteration(list(reversed(ALICE_APP)), [QuotaOp("producer_byte_rate", 2)]),
    )
    assert [r.error for r in results] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST]
    assert "/config/users/alice/clients/app" in results[1].message
    assert dict(img.client_quotas) == {("alice", False, "app", False): {"producer_byte_rate": 1.0}}


def test_entities_convert_both_ways() -> None:
    e = entity_of([Component(CLIENT_ID, None), Component(USER, "bob")])
    assert e == QuotaEntity("bob", False, None, True)
    assert entity_of(components_of(e)) == e


def test_describe_matches_exact_default_and_any_with_strict() -> None:
    stored = {
        ("alice", False, None, False): {"producer_byte_rate": 1.0},
        ("alice", False, "app", False): {"producer_byte_rate": 2.0},
        (None, True, None, False): {"producer_byte_rate": 3.0},
        (None, True, "app", False): {"producer_byte_rate": 4.0},
        (None, False, None, True): {"producer_byte_rate": 5.0},
    }

    def paths(*filters: FilterComponent, strict: bool = False) -> list[str]:
        return [e.path() for e, _ in describe_client_quotas(stored, filters, strict)]

    everything = sorted(QuotaEntity(*k).path() for k in stored)
    assert paths() == everything
    assert paths(strict=True) == []
    assert paths(FilterComponent(USER, "exact", "alice")) == ["/config/users/alice", "/config/users/alice/clients/app"]
    assert paths(FilterComponent(USER, "exact", "alice"), strict=True) == ["/config/users/alice"]
    assert paths(FilterComponent(USER, "default")) == ["/config/users/<default>", "/config/users/<default>/clients/app"]
    assert paths(FilterComponent(USER, "any"), FilterComponent(CLIENT_ID, "exact", "app")) == [
        "/config/users/<default>/clients/app",
        "/config/users/alice/clients/app",
    ]
    assert paths(FilterComponent(CLIENT_ID, "any"), strict=True) == ["/config/clients/<default>"]
    [(entity, values)] = describe_client_quotas(stored, [FilterComponent(CLIENT_ID, "default")])
    assert (entity, values) == (QuotaEntity(None, False, None, True), {"producer_byte_rate": 5.0})


@pytest.mark.parametrize(
    ("filters", "named"),
    [
        ([FilterComponent("ip", "any")], "'ip'"),
        ([FilterComponent(USER, "any"), FilterComponent(USER, "default")], "twice"),
        ([FilterComponent(CLIENT_ID, "exact")], "needs a name"),
    ],
)
def test_describe_refuses_a_bad_filter(filters, named) -> None:
    with pytest.raises(InvalidRequestError, match=named):
        describe_client_quotas({}, filters)
