"""CreateAcls, DeleteAcls and DescribeAcls decided against an image: a record per new binding, identical bindings
stored once, invalid bindings and filters refused on their own, a binding matched twice removed once."""

from __future__ import annotations

import itertools

import pytest
from controller_images import apply, build

from odradek.client.common.acls import (
    MATCH_ALL,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from odradek.client.common.metadata_image import MetadataImage
from odradek.client.errors import ErrorCode, InvalidRequestError
from odradek.controller.acl_changes import create_acls, delete_acls, describe_acls

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def binding(
    name: str = "orders",
    operation: AclOperation = AclOperation.READ,
    principal: str = "User:alice",
    *,
    resource_type: ResourceType = ResourceType.TOPIC,
    pattern: PatternType = PatternType.LITERAL,
    permission: AclPermissionType = ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def ids() -> itertools.count:
    return itertools.count(1)


def create(img: MetadataImage, *bindings: AclBinding) -> tuple[list, MetadataImage]:
    counter = ids()
    results = create_acls(img, bindings, new_id=lambda: next(counter).to_bytes(16, "big"))
    return results, apply(img, [r for res in results for r in res.records])


def test_new_bindings_get_one_record_each_and_identical_ones_are_stored_once() -> None:
    a, b = binding(), binding("pay-", AclOperation.WRITE, pattern=PatternType.PREFIXED, permission=DENY)
    results, img = create(build(), a, b, a)
    assert [(r.error, len(r.records)) for r in results] == [(ErrorCode.NONE, 1), (ErrorCode.NONE, 1), (0, 0)]
    assert sorted(img.acls.values()) == sorted([a, b])
    again, img2 = create(img, a)
    assert again[0].error == ErrorCode.NONE and again[0].records == [] and dict(img2.acls) == dict(img.acls)


def test_ids_are_fresh_uuids_by_default() -> None:
    results = create_acls(build(), [binding("x"), binding("y")])
    got = [r.records[0].access_control_entry.id for r in results]
    assert all(len(i) == 16 for i in got) and got[0] != got[1]


def test_an_id_already_in_use_is_drawn_again() -> None:
    _, img = create(build(), binding("x"))  # stored under id 1
    draws = iter([(1).to_bytes(16, "big"), (2).to_bytes(16, "big")])
    [result] = create_acls(img, [binding("y")], new_id=lambda: next(draws))
    assert result.records[0].access_control_entry.id == (2).to_bytes(16, "big")


@pytest.mark.parametrize(
    "bad, named",
    [
        (binding(resource_type=ResourceType.ANY), "resource type"),
        (binding(pattern=PatternType.MATCH), "pattern type"),
        (binding(operation=AclOperation.ANY), "operation"),
        (binding(permission=AclPermissionType.ANY), "permission"),
        (binding(""), "empty resource name"),
        (binding("other", AclOperation.ALTER, resource_type=ResourceType.CLUSTER), "kafka-cluster"),
        (binding(principal="alice"), "Type:name"),
        (binding(host="example.com"), "IP address"),
        (binding(operation=AclOperation.IDEMPOTENT_WRITE), "does not apply"),
    ],
)
def test_an_invalid_binding_is_refused_alone_with_invalid_request(bad: AclBinding, named: str) -> None:
    good = binding("fine")
    results, img = create(build(), bad, good)
    assert results[0].error == ErrorCode.INVALID_REQUEST and named in results[0].message
    assert results[0].records == [] and results[1].error == ErrorCode.NONE
    assert list(img.acls.values()) == [good]


def test_delete_removes_what_each_filter_matches_once() -> None:
    read, write = binding(), binding(operation=AclOperation.WRITE)
    group = binding("g", resource_type=ResourceType.GROUP)
    _, img = create(build(), read, write, group)
    results = delete_acls(
        img,
        [
            AclBindingFilter(resource_type=ResourceType.TOPIC, operation=AclOperation.READ),
            AclBindingFilter(resource_type=ResourceType.TOPIC),
            AclBindingFilter(principal="User:bob"),
        ],
    )
    assert [r.deleted for r in results] == [[read], [write], []]
    img = apply(img, [rec for r in results for rec in r.records])
    assert list(img.acls.values()) == [group]


def test_delete_refuses_an_unknown_value_in_a_filter_alone() -> None:
    _, img = create(build(), binding())
    results = delete_acls(img, [AclBindingFilter(operation=AclOperation.UNKNOWN), MATCH_ALL])
    assert results[0].error == ErrorCode.INVALID_REQUEST and results[0].deleted == [] and results[0].records == []
    assert results[1].deleted == [binding()]


def test_describe_matches_the_filter_in_a_stable_order() -> None:
    literal = binding("orders")
    prefixed = binding("ord", pattern=PatternType.PREFIXED)
    wildcard = binding("*", AclOperation.DESCRIBE, "User:*")
    other = binding("payments")
    _, img = create(build(), other, wildcard, prefixed, literal)
    assert describe_acls(img, MATCH_ALL) == sorted([literal, prefixed, wildcard, other])
    applying = AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.MATCH)
    assert describe_acls(img, applying) == sorted([literal, prefixed, wildcard])
    assert describe_acls(img, AclBindingFilter(resource_name="orders")) == [literal]
    with pytest.raises(InvalidRequestError, match="unknown resource type"):
        describe_acls(img, AclBindingFilter(resource_type=ResourceType.UNKNOWN))
