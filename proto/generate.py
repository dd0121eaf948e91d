"""Regenerate the committed protobuf/gRPC code from proto/*.proto, or check that it is current.

Usage: ``python proto/generate.py`` rewrites proto/*_pb2*.py(i); ``python proto/generate.py --check`` exits 1
and names the files that differ. The ``-Iodradek/proto=proto`` mapping keeps the ``odradek.proto`` import path,
so the generated modules import each other as ``from odradek.proto import x_pb2``. The ``.pyi`` stubs come from
mypy-protobuf (messages, enums and the gRPC stubs and servicers), so the type checker sees every rpc's request
and response types. Needs the ``dev`` extra (grpcio-tools, mypy-protobuf).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")


def generate(out_dir: Path) -> list[Path]:
    """Run protoc on every .proto file; return the generated files (under out_dir/odradek/proto)."""
    from grpc_tools import protoc

    bin_dir = Path(sys.executable).parent
    sources = sorted(p.name for p in PROTO_DIR.glob("*.proto"))
    args = [
        "grpc_tools.protoc",
        f"-Iodradek/proto={PROTO_DIR}",
        f"-I{Path(protoc.__file__).parent / '_proto'}",
        f"--python_out={out_dir}",
        f"--plugin=protoc-gen-mypy={bin_dir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bin_dir / 'protoc-gen-mypy_grpc'}",
        f"--mypy_out={out_dir}",
        f"--mypy_grpc_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *(f"{PROTO_DIR}/{name}" for name in sources),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return sorted((out_dir / "odradek" / "proto").iterdir())


def committed_files() -> list[Path]:
    return sorted(p for p in PROTO_DIR.iterdir() if p.name.endswith(GENERATED_SUFFIXES))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if anything differs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = {p.name: p for p in generate(Path(tmp)) if p.name.endswith(GENERATED_SUFFIXES)}
        old = {p.name: p for p in committed_files()}
        if args.check:
            differing = sorted(
                name
                for name in set(fresh) | set(old)
                if name not in fresh or name not in old or not filecmp.cmp(fresh[name], old[name], shallow=False)
            )
            if differing:
                print("generated code differs from proto/*.proto: " + ", ".join(differing), file=sys.stderr)
                return 1
            return 0
        for name in set(old) - set(fresh):
            old[name].unlink()
        for name, path in fresh.items():
            shutil.copyfile(path, PROTO_DIR / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
