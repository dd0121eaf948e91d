"""Which record codec runs: ``ODRADEK_NO_EXTENSIONS=1`` forces the pure-Python reference, and the choice is
reported by ``odradek --version`` and the broker's ``odradek_record_codec_info`` metric."""

import os
import subprocess
import sys

from odradek.broker.metrics import NodeMetrics
from odradek.client.cli.common import version_text
from odradek.client.record import codec, reference


def _implementation(env_value: str | None) -> str:
    env = dict(os.environ)
    env.pop(codec.NO_EXTENSIONS_ENV, None)
    if env_value is not None:
        env[codec.NO_EXTENSIONS_ENV] = env_value
    script = "from odradek.client.record import codec; print(codec.IMPLEMENTATION, codec.decode_records.__module__)"
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_no_extensions_selects_the_reference() -> None:
    assert _implementation("1") == "python odradek.client.record.reference"


def test_without_the_variable_the_native_codec_runs_when_built() -> None:
    try:
        from odradek.client.record import _native  # noqa: F401
    except ImportError:
        expected = "python odradek.client.record.reference"
    else:
        expected = "native odradek.client.record._native"
    assert _implementation(None) == expected
    assert _implementation("0") == expected


def test_the_codec_in_use_is_reported() -> None:
    line = version_text().splitlines()[1]
    if codec.IMPLEMENTATION == "native":
        assert line.startswith("record codec: native (crc32c: ")
        assert codec.records_end is not reference.records_end
    else:
        assert line.startswith(f"record codec: pure Python ({codec.REASON}; crc32c: ")
        assert codec.records_end is reference.records_end
    samples = [s for m in NodeMetrics(1).registry.collect() for s in m.samples if s.name == "odradek_record_codec_info"]
    assert [(s.labels, s.value) for s in samples] == [({"implementation": codec.IMPLEMENTATION}, 1.0)]
