"""The committed protobuf/gRPC code must be exactly what proto/*.proto generates."""

import ast
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


def _runtime_attributes(tree: ast.AST) -> list[ast.Attribute]:
    """Attribute accesses evaluated at run time: annotations are skipped (every module postpones them)."""
    out: list[ast.Attribute] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Attribute):
            out.append(node)
        for name, child in ast.iter_fields(node):
            if name in ("annotation", "returns"):
                continue
            for item in child if isinstance(child, list) else [child]:
                if isinstance(item, ast.AST):
                    visit(item)

    visit(tree)
    return out


def test_names_that_exist_only_in_the_type_stubs_are_not_used_at_run_time() -> None:
    """mypy-protobuf's stubs declare classes the runtime modules lack (``AdminAsyncStub``, the servicers' context
    types): code that calls one type-checks and then fails with AttributeError. Every ``x_pb2(_grpc).Name`` read
    outside an annotation must exist in the generated module."""
    import importlib

    missing = []
    for folder in ("broker", "chaos", "client", "controller", "deploy", "spark_connector"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text(), str(path))
            aliases = {}
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == "odradek.proto":
                    aliases.update(
                        {a.asname or a.name: a.name for a in node.names if a.name.endswith(("_pb2", "_grpc"))}
                    )
            for node in _runtime_attributes(tree):
                if isinstance(node.value, ast.Name) and node.value.id in aliases:
                    module = importlib.import_module(f"odradek.proto.{aliases[node.value.id]}")
                    if not hasattr(module, node.attr):
                        missing.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not missing, missing
