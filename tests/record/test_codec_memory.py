"""Memory safety of the native record codec: the differential property suite under AddressSanitizer, and a bounded
atheris fuzz run of the native decoder and walk against the reference.

Both build or load the extension themselves and run in a subprocess (ASan must be preloaded before the interpreter
starts; libFuzzer owns the process it runs in), and both are skipped with the reason when their tool is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from odradek.client.record.codec import NO_EXTENSIONS_ENV

pytestmark = pytest.mark.skipif(
    os.environ.get(NO_EXTENSIONS_ENV, "") not in ("", "0"),
    reason=f"the native record codec is disabled ({NO_EXTENSIONS_ENV})",
)

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "client" / "record" / "_native.c"
DIFFERENTIAL = Path(__file__).with_name("test_codec_differential.py")
FUZZ_TARGET = Path(__file__).with_name("fuzz_codec.py")


def _libasan() -> str | None:
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    found = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    return found if os.path.isabs(found) and os.path.exists(found) else None


def test_differential_suite_under_address_sanitizer(tmp_path: Path) -> None:
    """Every property of test_codec_differential against an ASan build: a read past a buffer (bytes objects are
    plain mallocs with PYTHONMALLOC=malloc) or a use after free of an object whose reference was not owned aborts
    the run with an ASan report."""
    libasan = _libasan()
    if libasan is None:
        pytest.skip("gcc with libasan is not available")
    module = tmp_path / f"_native{sysconfig.get_config_var('EXT_SUFFIX')}"
    include = sysconfig.get_paths()["include"]
    flags = ["-shared", "-fPIC", "-g", "-O1", "-fsanitize=address", "-fno-omit-frame-pointer", f"-I{include}"]
    build = subprocess.run(
        ["gcc", *flags, str(SOURCE), "-o", str(module)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert build.returncode == 0, build.stderr
    env = dict(
        {k: v for k, v in os.environ.items() if k != NO_EXTENSIONS_ENV},
        LD_PRELOAD=libasan,
        PYTHONMALLOC="malloc",
        ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:exitcode=99",
        ODRADEK_NATIVE_PATH=str(module),
        ODRADEK_CODEC_EXAMPLES="50",
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "-x", str(DIFFERENTIAL)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=240,
    )
    report = run.stdout[-3000:] + run.stderr[-3000:]
    assert "AddressSanitizer" not in run.stderr, report
    assert run.returncode == 0, report
    assert " passed" in run.stdout and "skipped" not in run.stdout, report


def test_fuzz_the_native_decoder(tmp_path: Path) -> None:
    """atheris, guided by the reference's coverage, feeds the native decoder and walk; any disagreement with the
    reference or a crash fails the run (bounded to 10 s)."""
    pytest.importorskip("atheris", reason="atheris is not installed (pip install atheris)")
    pytest.importorskip("odradek.client.record._native", reason="the native record codec is not built")
    run = subprocess.run(
        [sys.executable, str(FUZZ_TARGET), "-max_total_time=10", "-rss_limit_mb=1024", "-timeout=10"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    report = run.stdout[-2000:] + run.stderr[-3000:]
    assert run.returncode == 0, report
    assert "Done " in run.stderr, report  # libFuzzer's closing line: "Done N runs in M second(s)"
