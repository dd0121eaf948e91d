"""``odradek schema``: each command against a registry listener (over a store that commits at once), its JSON
output, and a refusal carried as an error with the registry's code."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from odradek.broker.schema_registry.server import RegistryListener
from odradek.broker.schema_registry.service import RegistryService
from odradek.client.cli.main import main

from .test_http import BREAKING, USER, USER2, InstantStore


@pytest.fixture
async def url() -> AsyncIterator[str]:
    listener = RegistryListener("127.0.0.1", 0, RegistryService(InstantStore()))
    await listener.start()
    yield f"http://127.0.0.1:{listener.port}"
    await listener.stop()


async def run(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, Any, str]:
    """Exit status, the JSON printed, and stderr."""
    status = await asyncio.to_thread(main, ["schema", *argv, "--registry-url", url, "--format", "json"])
    out, err = capsys.readouterr()
    return status, json.loads(out) if out.strip() else None, err


async def test_the_commands(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    v1, v2, breaking = tmp_path / "v1.avsc", tmp_path / "v2.avsc", tmp_path / "breaking.avsc"
    v1.write_text(USER)
    v2.write_text(USER2)
    breaking.write_text(BREAKING)
    assert await run(capsys, url, "register", "users-value", "-f", str(v1)) == (
        0,
        {"subject": "users-value", "id": 1, "version": 1},
        "",
    )
    assert (await run(capsys, url, "register", "users-value", "-f", str(v2)))[1]["version"] == 2
    assert (await run(capsys, url, "list"))[1] == ["users-value"]
    assert (await run(capsys, url, "list", "users-value"))[1] == [1, 2]
    got = (await run(capsys, url, "get", "users-value", "--version", "1"))[1]
    assert (got["id"], got["version"]) == (1, 1)
    assert (await run(capsys, url, "get", "--id", "2"))[1]["id"] == 2
    status, answer, _ = await run(capsys, url, "check", "users-value", "-f", str(breaking))
    assert status == 1 and answer["is_compatible"] is False and answer["messages"]
    assert (await run(capsys, url, "check", "users-value", "-f", str(v2), "--version", "1"))[0] == 0
    assert (await run(capsys, url, "config"))[1] == {"subject": None, "compatibility": "BACKWARD"}
    assert (await run(capsys, url, "config", "users-value", "--set", "FULL"))[1]["compatibility"] == "FULL"
    assert (await run(capsys, url, "config", "users-value", "--delete"))[1]["compatibility"] == "BACKWARD"
    assert (await run(capsys, url, "delete", "users-value", "--version", "2"))[1]["deleted"] == [2]
    assert (await run(capsys, url, "delete", "users-value"))[1]["deleted"] == [1]
    assert (await run(capsys, url, "delete", "users-value", "--permanent"))[1] == {
        "subject": "users-value",
        "deleted": [1, 2],
        "permanent": True,
    }


async def test_a_refusal_is_an_error_with_the_registrys_code(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = await run(capsys, url, "get", "nope")
    assert status != 0 and "40401" in json.loads(err)["error"]["message"]


async def test_tls_flags_with_a_plain_http_url_are_refused(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A flag that could not take effect is refused, never ignored: TLS files mean nothing to an http:// registry."""
    ca = tmp_path / "ca.pem"
    ca.write_text("unused")
    status, out, err = await run(capsys, url, "list", "--ca-location", str(ca))
    assert status != 0 and out is None
    assert "--ca-location: only for an https:// registry URL" in json.loads(err)["error"]["message"]
