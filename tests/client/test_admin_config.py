"""Admin validates its config as Producer and Consumer do (observed: ``Admin({})`` raised KeyError, typos passed)."""

from __future__ import annotations

import threading

import pytest

from odradek.client.admin import Admin, AsyncAdmin
from odradek.client.errors import ConfigError


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({}, "bootstrap.servers is required"),
        ({"bootstrap.servers": "a:1", "request.timeot.ms": 5}, "did you mean 'request.timeout.ms'"),
        ({"bootstrap.servers": "a:1", "metadata.max.age.ms": 5}, "unknown admin config 'metadata.max.age.ms'"),
        ({"bootstrap.servers": "a:1", "request.timeout.ms": 0}, "request.timeout.ms must be an integer"),
    ],
)
def test_bad_admin_configs(config: dict, message: str) -> None:
    threads = threading.active_count()
    with pytest.raises(ConfigError, match=message):
        Admin(config)
    with pytest.raises(ConfigError, match=message):
        AsyncAdmin(config)
    assert threading.active_count() == threads  # refused before any loop thread starts


def test_port_defaults_to_9092() -> None:
    assert AsyncAdmin({"bootstrap.servers": "127.0.0.1"})._servers == ["127.0.0.1:9092"]
