"""Quota entities: the 8-level precedence, who shares a quota, and validation of entities and values."""

from __future__ import annotations

import pytest

from odradek.client.errors import InvalidRequestError
from odradek.client.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    entity,
    precedence,
    resolve,
    validate_value,
)

USER, CLIENT = "alice", "app"
# The 8 levels for (alice, app), highest first, written out rather than taken from precedence().
LEVELS = [
    entity(USER, CLIENT),
    entity(USER, client_default=True),
    entity(USER),
    entity(client_id=CLIENT, user_default=True),
    entity(user_default=True, client_default=True),
    entity(user_default=True),
    entity(client_id=CLIENT),
    entity(client_default=True),
]
PATHS = [
    "/config/users/alice/clients/app",
    "/config/users/alice/clients/<default>",
    "/config/users/alice",
    "/config/users/<default>/clients/app",
    "/config/users/<default>/clients/<default>",
    "/config/users/<default>",
    "/config/clients/app",
    "/config/clients/<default>",
]


def value_of(quotas: dict, user: str, client_id: str, key: str) -> float:
    got = resolve(quotas, user, client_id, key)
    assert got is not None
    return got.value


def test_the_levels_are_kafkas_paths_in_order() -> None:
    assert [e.path() for e in LEVELS] == PATHS
    assert list(precedence(USER, CLIENT)) == LEVELS


@pytest.mark.parametrize("winner", range(8))
def test_each_level_wins_over_every_level_below_it(winner: int) -> None:
    # Every level from the winner down sets the quota (each to a different value); levels above set nothing.
    quotas = {LEVELS[i]: {PRODUCER_BYTE_RATE: 1000.0 + i} for i in range(winner, 8)}
    got = resolve(quotas, USER, CLIENT, PRODUCER_BYTE_RATE)
    assert got is not None and got.value == 1000.0 + winner and got.entity == LEVELS[winner]
    # Removing the winner hands the quota to the next level.
    del quotas[LEVELS[winner]]
    got = resolve(quotas, USER, CLIENT, PRODUCER_BYTE_RATE)
    if winner == 7:
        assert got is None  # no quota at all: unlimited
    else:
        assert got is not None and got.entity == LEVELS[winner + 1]


def test_each_key_is_resolved_on_its_own() -> None:
    quotas = {
        entity(USER, CLIENT): {PRODUCER_BYTE_RATE: 10.0},
        entity(USER): {CONSUMER_BYTE_RATE: 20.0},
        entity(client_default=True): {REQUEST_PERCENTAGE: 30.0, PRODUCER_BYTE_RATE: 99.0},
    }
    assert value_of(quotas, USER, CLIENT, PRODUCER_BYTE_RATE) == 10.0
    assert value_of(quotas, USER, CLIENT, CONSUMER_BYTE_RATE) == 20.0
    assert value_of(quotas, USER, CLIENT, REQUEST_PERCENTAGE) == 30.0
    # Another client of alice has only the user's and the default client's quotas.
    assert value_of(quotas, USER, "other", PRODUCER_BYTE_RATE) == 99.0
    assert resolve(quotas, "bob", "other", CONSUMER_BYTE_RATE) is None


def test_user_and_client_defaults_apply_to_whom_has_no_quota_of_its_own() -> None:
    quotas = {
        entity(user_default=True): {PRODUCER_BYTE_RATE: 1.0},
        entity("vip"): {PRODUCER_BYTE_RATE: 2.0},
        entity(client_default=True): {CONSUMER_BYTE_RATE: 3.0},
        entity(client_id="reporting"): {CONSUMER_BYTE_RATE: 4.0},
    }
    assert value_of(quotas, "anyone", "x", PRODUCER_BYTE_RATE) == 1.0
    assert value_of(quotas, "vip", "x", PRODUCER_BYTE_RATE) == 2.0
    assert value_of(quotas, "anyone", "x", CONSUMER_BYTE_RATE) == 3.0
    assert value_of(quotas, "anyone", "reporting", CONSUMER_BYTE_RATE) == 4.0


def test_the_sharing_key_follows_the_matched_entity() -> None:
    """A user's quota is shared by all its clients; a default applies to each user or client id separately."""
    cases = [
        (entity(USER, CLIENT), (USER, CLIENT)),
        (entity(USER, client_default=True), (USER, CLIENT)),
        (entity(USER), (USER, "")),
        (entity(user_default=True, client_id=CLIENT), (USER, CLIENT)),
        (entity(user_default=True, client_default=True), (USER, CLIENT)),
        (entity(user_default=True), (USER, "")),
        (entity(client_id=CLIENT), ("", CLIENT)),
        (entity(client_default=True), ("", CLIENT)),
    ]
    for e, key in cases:
        got = resolve({e: {PRODUCER_BYTE_RATE: 5.0}}, USER, CLIENT, PRODUCER_BYTE_RATE)
        assert got is not None and got.sharing_key == key, e.path()


def test_entities_equal_the_metadata_images_tuples() -> None:
    assert entity(USER, client_default=True) == (USER, False, None, True)
    assert QuotaEntity(None, True, CLIENT, False).to_dict() == {"user": None, "client_id": CLIENT}


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({}, "empty quota entity"),
        ({"user": ""}, "must not be empty"),
        ({"client_id": ""}, "must not be empty"),
        ({"user": "a", "user_default": True}, "not both"),
        ({"client_id": "a", "client_default": True}, "not both"),
    ],
)
def test_bad_entities_are_refused(kwargs: dict, words: str) -> None:
    with pytest.raises(InvalidRequestError, match=words):
        entity(**kwargs)


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("producer_byte_rates", 1, "unknown quota key 'producer_byte_rates'"),
        (PRODUCER_BYTE_RATE, -5, "positive"),
        (PRODUCER_BYTE_RATE, 0, "positive"),
        (CONSUMER_BYTE_RATE, "fast", "must be a number"),
        (CONSUMER_BYTE_RATE, "nan", "positive finite"),
        (CONSUMER_BYTE_RATE, float("inf"), "positive finite"),
        (PRODUCER_BYTE_RATE, 1.5, "whole number"),
        (REQUEST_PERCENTAGE, True, "must be a number"),
        (REQUEST_PERCENTAGE, None, "must be a number"),
    ],
)
def test_bad_values_are_refused_naming_the_key(key: str, value: object, words: str) -> None:
    with pytest.raises(InvalidRequestError, match=words):
        validate_value(key, value)


def test_good_values_are_numbers() -> None:
    assert validate_value(PRODUCER_BYTE_RATE, "2097152") == 2097152.0
    assert validate_value(REQUEST_PERCENTAGE, 0.5) == 0.5
