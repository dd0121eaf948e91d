"""``produce``/``consume`` refuse bad arguments with one ``error:`` line before contacting any cluster."""

from __future__ import annotations

import pytest

from odradek.client.cli.main import main

UNUSED = "127.0.0.1:1"  # never contacted: every case fails before connecting


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("consume", "t", "--partition", "-1"), "partition must be >= 0, not -1"),
        (("consume", "t", "-o", "x:5"), "bad offset"),
        (("consume", "t", "--num", "-2"), "--num must be >= 0"),
        (("consume", "t", "-f", "%z"), "unknown format token %z"),
        (("consume", "t", "--timeout-ms", "0"), "--timeout-ms must be at least 1"),
        (("produce", "t", "-k", "a", "-K", ":"), "not both"),
        (("produce", "t", "-H", "novalue"), "is not k=v"),
        (("produce", "t", "-D", ""), "--delimiter must not be empty"),
        (("produce", "t", "--timeout-ms", "9000", "--delivery-timeout-ms", "100"), "must be at least --timeout-ms"),
    ],
)
def test_bad_arguments_are_one_error_line(args: tuple[str, ...], expected: str, capsys) -> None:
    assert main([*args, "-X", UNUSED]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], err
