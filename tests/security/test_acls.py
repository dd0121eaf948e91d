"""The ACL authorizer core against Kafka's rules: pattern kinds, deny over allow, implied operations, super users,
wildcard principals and hosts, no-ACL-found, filters, validation, and KIP-679's check by resource type; properties
compare the indexed authorizer with a naive scan of every binding."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.client.common.acls import (
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourceType,
    normalize_host,
    validate_binding,
    validate_filter,
)

Op = AclOperation
ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY
LITERAL = PatternType.LITERAL
PREFIXED = PatternType.PREFIXED
TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
CLUSTER = ResourceType.CLUSTER
TXN = ResourceType.TRANSACTIONAL_ID
ALICE = "User:alice"
BOB = "User:bob"
HOST = "10.0.0.1"


def acl(
    name: str = "orders",
    op: AclOperation = Op.READ,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = ALICE,
    pattern: PatternType = LITERAL,
    host: str = "*",
    resource_type: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, op, permission)


def may(
    authorizer: Authorizer,
    op: AclOperation = Op.READ,
    name: str = "orders",
    *,
    principal: str = ALICE,
    host: str = HOST,
    resource_type: ResourceType = TOPIC,
) -> bool:
    return authorizer.authorize(principal, host, op, resource_type, name)


# Where a binding sits relative to the topic "orders": its literal name, the wildcard, or a prefix of it.
PLACES: dict[str, tuple[str, PatternType]] = {
    "literal": ("orders", LITERAL),
    "wildcard": ("*", LITERAL),
    "prefixed": ("ord", PREFIXED),
}


def at(
    place: str, op: AclOperation = Op.READ, permission: AclPermissionType = ALLOW, principal: str = ALICE
) -> AclBinding:
    name, pattern = PLACES[place]
    return acl(name, op, permission, pattern=pattern, principal=principal)


@pytest.mark.parametrize(("allow_at", "deny_at"), list(itertools.product(PLACES, PLACES)))
def test_any_matching_deny_beats_any_allow(allow_at: str, deny_at: str) -> None:
    allow = at(allow_at, Op.READ, ALLOW)
    deny = at(deny_at, Op.READ, DENY)
    authorizer = Authorizer([allow])
    assert may(authorizer)
    authorizer.add([deny])
    assert not may(authorizer)
    authorizer.remove(AclBindingFilter(permission=DENY))
    assert may(authorizer)


@pytest.mark.parametrize("deny_at", list(PLACES))
def test_a_deny_for_every_principal_or_from_any_host_beats_a_specific_allow(deny_at: str) -> None:
    authorizer = Authorizer([acl(host=HOST)])
    authorizer.add([at(deny_at, Op.READ, DENY, principal="User:*")])
    assert not may(authorizer)


def test_a_deny_elsewhere_does_not_apply() -> None:
    authorizer = Authorizer(
        [
            acl(),
            acl("orders-eu", permission=DENY),  # a longer literal name
            acl("orders-", permission=DENY, pattern=PREFIXED),  # a prefix longer than the name
            acl("ord", permission=DENY),  # a literal that is only a prefix
            acl("orders", permission=DENY, resource_type=GROUP),  # same name, other type
            acl(permission=DENY, principal=BOB),
            acl(permission=DENY, host="10.0.0.2"),
            acl(op=Op.WRITE, permission=DENY),
        ]
    )
    assert may(authorizer)


@pytest.mark.parametrize("implying", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.ALL])
def test_allowing_read_write_delete_or_alter_allows_describe(implying: AclOperation) -> None:
    assert may(Authorizer([acl(op=implying)]), Op.DESCRIBE)


@pytest.mark.parametrize("other", [Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS])
def test_other_operations_do_not_imply_describe(other: AclOperation) -> None:
    assert not may(Authorizer([acl(op=other)]), Op.DESCRIBE)


def test_alter_configs_implies_describe_configs_and_nothing_implies_upwards() -> None:
    assert may(Authorizer([acl(op=Op.ALTER_CONFIGS)]), Op.DESCRIBE_CONFIGS)
    assert not may(Authorizer([acl(op=Op.ALTER)]), Op.DESCRIBE_CONFIGS)
    assert not may(Authorizer([acl(op=Op.DESCRIBE)]), Op.READ)
    assert not may(Authorizer([acl(op=Op.DESCRIBE_CONFIGS)]), Op.ALTER_CONFIGS)
    assert not may(Authorizer([acl(op=Op.READ)]), Op.WRITE)


@pytest.mark.parametrize(
    ("denied", "allowed", "requested"),
    [
        (Op.READ, Op.DESCRIBE, Op.DESCRIBE),
        (Op.READ, Op.ALL, Op.DESCRIBE),
        (Op.ALTER_CONFIGS, Op.ALL, Op.DESCRIBE_CONFIGS),
    ],
)
def test_denying_an_implying_operation_does_not_deny_the_implied_one(
    denied: AclOperation, allowed: AclOperation, requested: AclOperation
) -> None:
    authorizer = Authorizer([acl(op=denied, permission=DENY), acl(op=allowed)])
    assert may(authorizer, requested)
    assert not may(authorizer, denied)


def test_all_allows_and_denies_every_operation() -> None:
    allow_all = Authorizer([acl(op=Op.ALL)])
    assert all(may(allow_all, op) for op in SUPPORTED_OPERATIONS[TOPIC])
    deny_all = Authorizer([acl(op=Op.ALL, permission=DENY), acl(op=Op.READ), acl(op=Op.DESCRIBE)])
    assert not any(may(deny_all, op) for op in SUPPORTED_OPERATIONS[TOPIC])


def test_super_users_are_allowed_whatever_the_bindings_say() -> None:
    authorizer = Authorizer(
        [acl(op=Op.ALL, permission=DENY, principal="User:admin"), acl(op=Op.ALL, permission=DENY, principal="User:*")],
        super_users={"User:admin"},
    )
    assert may(authorizer, principal="User:admin")
    assert may(authorizer, Op.CLUSTER_ACTION, "kafka-cluster", principal="User:admin", resource_type=CLUSTER)
    assert authorizer.authorize_by_resource_type("User:admin", HOST, Op.WRITE, TOPIC)
    assert not may(authorizer, principal=ALICE)
    # Only the exact principal: the same name of another type is not a super user.
    assert not may(authorizer, principal="Group:admin")
    with pytest.raises(ValueError, match="Type:name"):
        Authorizer(super_users={"admin"})


def test_a_binding_for_user_star_applies_to_every_principal() -> None:
    authorizer = Authorizer([acl(principal="User:*")])
    assert may(authorizer, principal=ALICE)
    assert may(authorizer, principal=BOB)
    authorizer.add([acl(principal=BOB, permission=DENY)])
    assert may(authorizer, principal=ALICE)
    assert not may(authorizer, principal=BOB)


def test_a_binding_for_one_user_does_not_apply_to_another() -> None:
    authorizer = Authorizer([acl(principal=ALICE)])
    assert not may(authorizer, principal=BOB)


def test_hosts_match_exactly_or_by_wildcard() -> None:
    authorizer = Authorizer([acl(host="10.0.0.1"), acl(host="::1")])
    assert may(authorizer, host="10.0.0.1")
    assert may(authorizer, host="::1")
    assert not may(authorizer, host="10.0.0.2")
    authorizer.add([acl(host="*", op=Op.WRITE)])
    assert may(authorizer, Op.WRITE, host="10.0.0.2")
    authorizer.add([acl(host="10.0.0.2", op=Op.WRITE, permission=DENY)])
    assert not may(authorizer, Op.WRITE, host="10.0.0.2")
    assert may(authorizer, Op.WRITE, host="10.0.0.3")


@pytest.mark.parametrize("allow_everyone", [True, False])
def test_no_acl_found_for_the_resource_answers_with_the_setting(allow_everyone: bool) -> None:
    authorizer = Authorizer(
        [
            acl("payments"),
            acl("orders-", pattern=PREFIXED),
            acl("orders", resource_type=GROUP),
            acl("ord"),
        ],
        allow_everyone_if_no_acl_found=allow_everyone,
    )
    assert may(authorizer, Op.WRITE, principal=BOB) is allow_everyone
    assert may(Authorizer(allow_everyone_if_no_acl_found=allow_everyone)) is allow_everyone


@pytest.mark.parametrize("place", list(PLACES))
def test_any_binding_on_the_resource_turns_the_default_off_even_for_others(place: str) -> None:
    authorizer = Authorizer([at(place, Op.WRITE, principal=BOB)], allow_everyone_if_no_acl_found=True)
    assert not may(authorizer, Op.READ, principal=ALICE)


def test_removing_the_last_binding_restores_the_default() -> None:
    authorizer = Authorizer([acl("ord", principal=BOB, pattern=PREFIXED)], allow_everyone_if_no_acl_found=True)
    assert not may(authorizer)
    assert authorizer.remove(AclBindingFilter(principal=BOB)) == [acl("ord", principal=BOB, pattern=PREFIXED)]
    assert may(authorizer)
    assert len(authorizer) == 0


def test_prefixes_of_several_lengths_and_types_are_all_consulted() -> None:
    authorizer = Authorizer(
        [
            acl("o", pattern=PREFIXED, op=Op.READ),
            acl("orde", pattern=PREFIXED, op=Op.WRITE),
            acl("orders-eu-1", pattern=PREFIXED, op=Op.DELETE),
            acl("x", pattern=PREFIXED, op=Op.ALTER),
            acl("or", pattern=PREFIXED, op=Op.ALL, resource_type=GROUP),
        ]
    )
    assert may(authorizer, Op.READ) and may(authorizer, Op.WRITE)
    assert not may(authorizer, Op.DELETE) and not may(authorizer, Op.ALTER) and not may(authorizer, Op.CREATE)
    assert may(authorizer, Op.DELETE, "orders-eu-1-x")


def test_adding_an_existing_binding_is_idempotent() -> None:
    authorizer = Authorizer()
    assert authorizer.add([acl(), acl(op=Op.WRITE)]) == [acl(), acl(op=Op.WRITE)]
    assert authorizer.add([acl(), acl(op=Op.CREATE)]) == [acl(op=Op.CREATE)]
    assert len(authorizer) == 3
    assert authorizer.remove(AclBindingFilter(operation=Op.READ)) == [acl()]
    assert acl() not in authorizer
    assert not may(authorizer)


def test_add_stores_nothing_when_one_binding_is_invalid() -> None:
    authorizer = Authorizer()
    with pytest.raises(ValueError, match="empty resource name"):
        authorizer.add([acl(), acl("")])
    assert len(authorizer) == 0


# --- filters -------------------------------------------------------------------------------------------------------

STORED = [
    acl("orders"),
    acl("*"),
    acl("ord", pattern=PREFIXED),
    acl("orders", pattern=PREFIXED),
    acl("orders-eu", pattern=PREFIXED),
    acl("payments"),
    acl("orders", resource_type=GROUP),
    acl("orders", principal=BOB, op=Op.WRITE, permission=DENY, host="10.0.0.2"),
]


@pytest.mark.parametrize(
    ("acl_filter", "expected"),
    [
        (AclBindingFilter(), STORED),
        (AclBindingFilter(resource_type=ResourceType.ANY, pattern_type=PatternType.ANY, operation=Op.ANY), STORED),
        (
            AclBindingFilter(TOPIC, "orders", PatternType.ANY),
            [STORED[0], STORED[3], STORED[7]],
        ),
        (AclBindingFilter(TOPIC, "orders", LITERAL), [STORED[0], STORED[7]]),
        (AclBindingFilter(TOPIC, "orders", PREFIXED), [STORED[3]]),
        (AclBindingFilter(TOPIC, "*", LITERAL), [STORED[1]]),
        (
            AclBindingFilter(TOPIC, "orders", PatternType.MATCH),
            [STORED[0], STORED[1], STORED[2], STORED[3], STORED[7]],
        ),
        (AclBindingFilter(TOPIC, "orders-eu-1", PatternType.MATCH), [STORED[1], STORED[2], STORED[3], STORED[4]]),
        (AclBindingFilter(TOPIC, None, PatternType.MATCH), [*STORED[:6], STORED[7]]),
        (AclBindingFilter(TOPIC, None, PREFIXED), [STORED[2], STORED[3], STORED[4]]),
        (AclBindingFilter(GROUP), [STORED[6]]),
        (AclBindingFilter(principal=BOB), [STORED[7]]),
        (AclBindingFilter(principal="User:*"), []),
        (AclBindingFilter(host="10.0.0.2"), [STORED[7]]),
        (AclBindingFilter(host="*"), [b for b in STORED if b.host == "*"]),
        (AclBindingFilter(operation=Op.WRITE), [STORED[7]]),
        (AclBindingFilter(permission=DENY), [STORED[7]]),
        (AclBindingFilter(permission=AclPermissionType.ANY), STORED),
        (AclBindingFilter(resource_name="nothing"), []),
    ],
)
def test_filters_describe_and_remove_exactly_what_they_match(
    acl_filter: AclBindingFilter, expected: list[AclBinding]
) -> None:
    assert [b for b in STORED if acl_filter.matches(b)] == expected
    authorizer = Authorizer(STORED)
    assert authorizer.describe(acl_filter) == sorted(expected)
    assert authorizer.remove(acl_filter) == sorted(expected)
    assert authorizer.describe() == sorted(b for b in STORED if b not in expected)
    assert authorizer.remove(acl_filter) == []


@pytest.mark.parametrize(
    "acl_filter",
    [
        AclBindingFilter(resource_type=ResourceType.UNKNOWN),
        AclBindingFilter(pattern_type=PatternType.UNKNOWN),
        AclBindingFilter(operation=Op.UNKNOWN),
        AclBindingFilter(permission=AclPermissionType.UNKNOWN),
    ],
)
def test_a_filter_with_an_unknown_value_is_refused(acl_filter: AclBindingFilter) -> None:
    with pytest.raises(ValueError, match="unknown"):
        validate_filter(acl_filter)
    with pytest.raises(ValueError, match="unknown"):
        Authorizer([acl()]).remove(acl_filter)


# --- validation ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (acl(resource_type=ResourceType.ANY), "resource type ANY"),
        (acl(resource_type=ResourceType.UNKNOWN), "resource type UNKNOWN"),
        (acl(pattern=PatternType.ANY), "pattern type ANY"),
        (acl(pattern=PatternType.MATCH), "pattern type MATCH"),
        (acl(pattern=PatternType.UNKNOWN), "pattern type UNKNOWN"),
        (acl(op=Op.ANY), "operation ANY"),
        (acl(op=Op.UNKNOWN), "operation UNKNOWN"),
        (acl(permission=AclPermissionType.ANY), "permission type ANY"),
        (acl(permission=AclPermissionType.UNKNOWN), "permission type UNKNOWN"),
        (acl(""), "empty resource name"),
        (acl("", pattern=PREFIXED), "empty resource name"),
        (acl("my-cluster", op=Op.ALTER, resource_type=CLUSTER), "only valid name for the CLUSTER"),
        (acl("*", op=Op.ALTER, resource_type=CLUSTER), "only valid name for the CLUSTER"),
        (acl(principal="alice"), "not of the form Type:name"),
        (acl(principal="User:"), "empty type or name"),
        (acl(principal=":alice"), "empty type or name"),
        (acl(host="example.com"), "neither"),
        (acl(host="10.0.0.300"), "neither"),
        (acl(host="0:0::1"), "canonical form; write ::1"),
        (acl(op=Op.IDEMPOTENT_WRITE), "IdempotentWrite does not apply to Topic"),
        (acl(op=Op.CLUSTER_ACTION), "does not apply to Topic"),
        (acl(op=Op.WRITE, resource_type=GROUP), "does not apply to Group"),
        (acl(op=Op.ALTER_CONFIGS, resource_type=GROUP), "does not apply to Group"),
        (acl(op=Op.READ, resource_type=TXN), "does not apply to TransactionalId"),
        (acl("kafka-cluster", op=Op.READ, resource_type=CLUSTER), "does not apply to Cluster"),
        (acl("kafka-cluster", op=Op.WRITE, resource_type=CLUSTER), "does not apply to Cluster"),
    ],
)
def test_validation_refuses_what_cannot_be_stored(binding: AclBinding, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        validate_binding(binding)


@pytest.mark.parametrize(("resource_type", "ops"), list(SUPPORTED_OPERATIONS.items()))
def test_validation_accepts_kafkas_table_of_operations(
    resource_type: ResourceType, ops: frozenset[AclOperation]
) -> None:
    name = "kafka-cluster" if resource_type is CLUSTER else "x"
    for op, pattern, principal, host in itertools.product(ops, (LITERAL, PREFIXED), (ALICE, "User:*"), ("*", "::1")):
        validate_binding(
            acl(name, op, DENY, principal=principal, pattern=pattern, host=host, resource_type=resource_type)
        )
    expected = {
        TOPIC: {"Read", "Write", "Create", "Delete", "Alter", "Describe", "DescribeConfigs", "AlterConfigs", "All"},
        GROUP: {"Read", "Describe", "Delete", "All"},
        CLUSTER: {
            "Create",
            "ClusterAction",
            "DescribeConfigs",
            "AlterConfigs",
            "IdempotentWrite",
            "Alter",
            "Describe",
            "All",
        },
        TXN: {"Describe", "Write", "All"},
        # odradek's own: a schema registry subject (docs/schema-registry.md)
        ResourceType.SUBJECT: {"Read", "Write", "Delete", "Describe", "DescribeConfigs", "AlterConfigs", "All"},
    }[resource_type]
    assert {op.display_name for op in ops} == expected


def test_normalize_host() -> None:
    assert normalize_host("*") == "*"
    assert normalize_host("0:0:0:0:0:0:0:1") == "::1"
    assert normalize_host("10.0.0.1") == "10.0.0.1"
    with pytest.raises(ValueError, match="neither"):
        normalize_host("localhost")


@pytest.mark.parametrize(
    "op", [Op.ANY, Op.UNKNOWN]
)  # a request names one concrete operation on one concrete type, as Kafka's checks require
def test_requests_must_be_concrete(op: AclOperation) -> None:
    authorizer = Authorizer()
    with pytest.raises(ValueError, match="cannot authorize"):
        authorizer.authorize(ALICE, HOST, op, TOPIC, "orders")
    with pytest.raises(ValueError, match="cannot authorize"):
        authorizer.authorize(ALICE, HOST, Op.READ, ResourceType.ANY, "orders")
    with pytest.raises(ValueError, match="cannot authorize"):
        authorizer.authorize_by_resource_type(ALICE, HOST, op, TOPIC)


# --- enums ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("enum", "text", "member"),
    [
        (AclOperation, "read", Op.READ),
        (AclOperation, "Read", Op.READ),
        (AclOperation, "READ", Op.READ),
        (AclOperation, "IdempotentWrite", Op.IDEMPOTENT_WRITE),
        (AclOperation, "idempotent-write", Op.IDEMPOTENT_WRITE),
        (AclOperation, "idempotent_write", Op.IDEMPOTENT_WRITE),
        (AclOperation, "AlterConfigs", Op.ALTER_CONFIGS),
        (AclOperation, "describe-configs", Op.DESCRIBE_CONFIGS),
        (AclOperation, "ClusterAction", Op.CLUSTER_ACTION),
        (AclOperation, "all", Op.ALL),
        (AclOperation, "any", Op.ANY),
        (ResourceType, "topic", TOPIC),
        (ResourceType, "TransactionalId", TXN),
        (ResourceType, "transactional-id", TXN),
        (ResourceType, "Cluster", CLUSTER),
        (PatternType, "literal", LITERAL),
        (PatternType, "Prefixed", PREFIXED),
        (PatternType, "match", PatternType.MATCH),
        (AclPermissionType, "allow", ALLOW),
        (AclPermissionType, "Deny", DENY),
    ],
)
def test_enum_names_parse_as_the_cli_gives_them(enum: type[AclOperation], text: str, member: AclOperation) -> None:
    assert enum.parse(text) is member


@pytest.mark.parametrize(
    ("enum", "text", "message"),
    [
        (AclOperation, "reed", r"unknown operation 'reed'; valid: Any, All, Read, .*IdempotentWrite"),
        (AclOperation, "unknown", "unknown operation"),
        (ResourceType, "user", r"unknown resource type 'user'; valid: Any, Topic, Group, Cluster, TransactionalId"),
        (PatternType, "regex", r"unknown resource pattern type 'regex'; valid: Any, Match, Literal, Prefixed"),
        (AclPermissionType, "", r"unknown permission type ''; valid: Any, Deny, Allow"),
    ],
)
def test_unknown_enum_names_are_refused_with_the_choices(enum: type[AclOperation], text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        enum.parse(text)


def test_enums_carry_kafkas_wire_codes() -> None:
    assert [(op.name, int(op)) for op in AclOperation][-1] == ("IDEMPOTENT_WRITE", 12)
    assert int(Op.DESCRIBE) == 8 and int(Op.CLUSTER_ACTION) == 9 and int(Op.ALL) == 2
    assert (int(TOPIC), int(GROUP), int(CLUSTER), int(TXN)) == (2, 3, 4, 5)
    assert (int(PatternType.MATCH), int(LITERAL), int(PREFIXED)) == (2, 3, 4)
    assert (int(DENY), int(ALLOW)) == (2, 3)
    assert AclOperation.from_code(13) is Op.UNKNOWN  # CREATE_TOKENS, which odradek does not have
    assert ResourceType.from_code(6) is ResourceType.UNKNOWN  # DELEGATION_TOKEN
    assert ResourceType.from_code(5) is TXN


# --- authorize_by_resource_type (KIP-679) --------------------------------------------------------------------------


def by_type(authorizer: Authorizer, op: AclOperation = Op.WRITE, principal: str = ALICE, host: str = HOST) -> bool:
    return authorizer.authorize_by_resource_type(principal, host, op, TOPIC)


@pytest.mark.parametrize(
    ("bindings", "expected"),
    [
        ([], False),
        ([acl("a", Op.WRITE)], True),
        ([acl("a", Op.ALL)], True),
        ([acl("a", Op.WRITE, principal="User:*")], True),
        ([acl("a", Op.READ)], False),  # another operation
        ([acl("a", Op.WRITE, principal=BOB)], False),
        ([acl("a", Op.WRITE, host="10.0.0.9")], False),
        ([acl("a", Op.WRITE), acl("a", Op.WRITE, DENY)], False),
        ([acl("a", Op.WRITE), acl("a", Op.ALL, DENY, principal="User:*")], False),
        ([acl("a", Op.WRITE), acl("a", Op.READ, DENY)], True),  # the deny is for another operation
        ([acl("a", Op.WRITE), acl("a", Op.WRITE, DENY, host="10.0.0.9")], True),
        ([acl("a", Op.WRITE), acl("b", Op.WRITE, DENY)], True),
        ([acl("ab", Op.WRITE), acl("a", Op.WRITE, DENY, pattern=PREFIXED)], False),
        ([acl("ab", Op.WRITE), acl("b", Op.WRITE, DENY, pattern=PREFIXED)], True),
        ([acl("ab", Op.WRITE, pattern=PREFIXED), acl("a", Op.WRITE, DENY, pattern=PREFIXED)], False),
        ([acl("ab", Op.WRITE, pattern=PREFIXED), acl("ab", Op.WRITE, DENY, pattern=PREFIXED)], False),
        ([acl("a", Op.WRITE, pattern=PREFIXED), acl("ab", Op.WRITE, DENY, pattern=PREFIXED)], True),  # "ac" is left
        ([acl("a", Op.WRITE, pattern=PREFIXED), acl("a", Op.WRITE, DENY)], True),  # "ab" is left
        ([acl("a", Op.WRITE), acl("*", Op.WRITE, DENY)], False),
        ([acl("*", Op.WRITE), acl("a", Op.WRITE, DENY, pattern=PREFIXED)], True),  # "b" is left
        ([acl("*", Op.WRITE), acl("*", Op.WRITE, DENY)], False),
        ([acl("a", Op.WRITE), acl("b", Op.WRITE), acl("a", Op.WRITE, DENY)], True),
    ],
)
def test_authorize_by_resource_type(bindings: list[AclBinding], expected: bool) -> None:
    assert by_type(Authorizer(bindings)) is expected


def test_authorize_by_resource_type_ignores_implied_operations_as_kafka_does() -> None:
    authorizer = Authorizer([acl("a", Op.READ)])
    assert may(authorizer, Op.DESCRIBE, "a")
    assert not by_type(authorizer, Op.DESCRIBE)


def test_authorize_by_resource_type_with_allow_everyone_if_no_acl_found() -> None:
    # Some topic has no ACL at all, and on it everyone is allowed: even a deny elsewhere leaves it.
    authorizer = Authorizer([acl("a", Op.WRITE, DENY, pattern=PREFIXED)], allow_everyone_if_no_acl_found=True)
    assert by_type(authorizer)
    # A wildcard binding (anyone's) leaves no topic without ACLs: then the bindings decide.
    authorizer.add([acl("*", Op.READ, principal=BOB)])
    assert not by_type(authorizer)
    authorizer.add([acl("b", Op.WRITE)])
    assert by_type(authorizer)


# --- properties ----------------------------------------------------------------------------------------------------

NAMES = st.text(alphabet="ab", min_size=1, max_size=3)
PRINCIPALS = st.sampled_from([ALICE, BOB, "User:*"])
HOSTS = st.sampled_from(["*", "10.0.0.1", "10.0.0.2"])
RESOURCE_TYPES = st.sampled_from([TOPIC, GROUP])


@st.composite
def bindings(draw: st.DrawFn) -> AclBinding:
    resource_type = draw(RESOURCE_TYPES)
    pattern = draw(st.sampled_from([LITERAL, PREFIXED]))
    name = draw(st.one_of(NAMES, st.just("*"))) if pattern is LITERAL else draw(NAMES)
    op = draw(st.sampled_from(sorted(SUPPORTED_OPERATIONS[resource_type])))
    permission = draw(st.sampled_from([ALLOW, DENY]))
    return AclBinding(resource_type, name, pattern, draw(PRINCIPALS), draw(HOSTS), op, permission)


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, AclOperation, ResourceType, str]:
    resource_type = draw(RESOURCE_TYPES)
    op = draw(st.sampled_from(sorted(SUPPORTED_OPERATIONS[resource_type] - {Op.ALL})))
    return (
        draw(st.sampled_from([ALICE, BOB])),
        draw(st.sampled_from(["10.0.0.1", "10.0.0.2"])),
        op,
        resource_type,
        draw(NAMES),
    )


def naive(
    stored: list[AclBinding],
    allow_everyone: bool,
    request: tuple[str, str, AclOperation, ResourceType, str],
) -> bool:
    """Kafka's rules read straight off the docs, scanning every binding."""
    principal, host, op, resource_type, name = request
    applicable = [
        b
        for b in stored
        if b.resource_type is resource_type
        and (
            (b.pattern_type is LITERAL and b.resource_name in (name, "*"))
            or (b.pattern_type is PREFIXED and name.startswith(b.resource_name))
        )
    ]
    if not applicable:
        return allow_everyone
    matching = [b for b in applicable if b.principal in (principal, "User:*") and b.host in (host, "*")]
    if any(b.permission is DENY and b.operation in (op, Op.ALL) for b in matching):
        return False
    implied = {Op.DESCRIBE: {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}, Op.DESCRIBE_CONFIGS: {Op.ALTER_CONFIGS}}
    return any(
        b.permission is ALLOW and (b.operation in (op, Op.ALL) or b.operation in implied.get(op, set()))
        for b in matching
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(bindings(), max_size=25), st.booleans(), st.lists(requests(), min_size=1, max_size=10))
def test_authorize_agrees_with_a_scan_of_every_binding(
    stored: list[AclBinding], allow_everyone: bool, asked: list[tuple[str, str, AclOperation, ResourceType, str]]
) -> None:
    authorizer = Authorizer(stored, allow_everyone_if_no_acl_found=allow_everyone)
    for request in asked:
        assert authorizer.authorize(*request) is naive(stored, allow_everyone, request)


@settings(max_examples=200, deadline=None)
@given(st.lists(bindings(), max_size=25), st.booleans(), bindings(), st.lists(requests(), min_size=1, max_size=10))
def test_adding_a_deny_never_allows_more(
    stored: list[AclBinding],
    allow_everyone: bool,
    extra: AclBinding,
    asked: list[tuple[str, str, AclOperation, ResourceType, str]],
) -> None:
    deny = AclBinding(
        extra.resource_type, extra.resource_name, extra.pattern_type, extra.principal, extra.host, extra.operation, DENY
    )
    before = Authorizer(stored, allow_everyone_if_no_acl_found=allow_everyone)
    after = Authorizer([*stored, deny], allow_everyone_if_no_acl_found=allow_everyone)
    for request in asked:
        if not before.authorize(*request):
            assert not after.authorize(*request)


@settings(max_examples=200, deadline=None)
@given(st.lists(bindings(), max_size=25), st.lists(bindings(), max_size=10), st.lists(requests(), max_size=10))
def test_removing_bindings_leaves_the_same_answers_as_never_adding_them(
    kept: list[AclBinding], dropped: list[AclBinding], asked: list[tuple[str, str, AclOperation, ResourceType, str]]
) -> None:
    authorizer = Authorizer([*kept, *dropped])
    for binding in dropped:
        if binding not in kept:
            authorizer.remove(AclBindingFilter(*(getattr(binding, f) for f in AclBinding.__dataclass_fields__)))
    fresh = Authorizer(kept)
    assert authorizer.describe() == fresh.describe()
    # The prefix lengths a check looks up shrink back too (white-box: a stale length costs lookups, not answers).
    lengths = {t: lengths for t, lengths in authorizer._prefix_lengths.items() if lengths}
    assert lengths == {t: lengths for t, lengths in fresh._prefix_lengths.items() if lengths}
    for request in asked:
        assert authorizer.authorize(*request) is fresh.authorize(*request)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(bindings(), max_size=20),
    st.booleans(),
    st.sampled_from([ALICE, BOB]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    RESOURCE_TYPES,
    st.data(),
)
def test_authorize_by_resource_type_is_true_exactly_when_some_resource_is_authorized(
    stored: list[AclBinding],
    allow_everyone: bool,
    principal: str,
    host: str,
    resource_type: ResourceType,
    data: st.DataObject,
) -> None:
    """Without implied operations (which KIP-679's check leaves out), the answer is whether authorize allows some
    name: a bound name, or a bound name or prefix followed by a character no binding uses (which no longer denied
    prefix or literal can cover), or a name no binding applies to."""
    ops = SUPPORTED_OPERATIONS[resource_type] - {Op.ALL, Op.DESCRIBE, Op.DESCRIBE_CONFIGS}
    op = data.draw(st.sampled_from(sorted(ops)))
    authorizer = Authorizer(stored, allow_everyone_if_no_acl_found=allow_everyone)
    names = {b.resource_name for b in stored if b.resource_name != "*"}
    candidates = names | {name + "z" for name in names} | {"z"}
    expected = any(authorizer.authorize(principal, host, op, resource_type, name) for name in candidates)
    assert authorizer.authorize_by_resource_type(principal, host, op, resource_type) is expected
