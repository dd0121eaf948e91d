"""The committed protobuf/gRPC code must be exactly what proto/*.proto generates."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_generated_code_matches_proto_files() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "proto" / "generate.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_check_detects_a_stale_file(tmp_path: Path, monkeypatch) -> None:
    """The check is able to fail: a generated file that no longer matches its .proto is reported."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("generate", ROOT / "proto" / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    copy = tmp_path / "proto"
    copy.mkdir()
    for path in (ROOT / "proto").iterdir():
        if path.is_file():
            (copy / path.name).write_bytes(path.read_bytes())
    stale = copy / "common_pb2.py"
    stale.write_text(stale.read_text() + "\n# edited by hand\n")
    monkeypatch.setattr(generate, "PROTO_DIR", copy)
    assert generate.main(["--check"]) == 1


def test_generated_modules_use_the_odradek_import_path() -> None:
    from odradek.proto import broker_pb2, broker_pb2_grpc

    assert broker_pb2.DESCRIPTOR.package == "odradek.v1"
    assert "from odradek.proto import broker_pb2" in Path(broker_pb2_grpc.__file__).read_text()
