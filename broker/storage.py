"""``meta.properties``: which cluster and node a log directory belongs to (Kafka's ``kafka-storage format``).

A node refuses to start on a directory that is unformatted or formatted for another cluster or node, so a
misconfigured node cannot mix its data into the wrong cluster.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import uuid
from pathlib import Path

from odradek.broker.config import NodeConfig

META_FILE = "meta.properties"
_CLUSTER_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class StorageFormatError(RuntimeError):
    """A log directory is missing, unformatted, or belongs to another cluster or node."""


def check_cluster_id(cluster_id: str) -> None:
    """Refuse a cluster id that is not a UUID in Kafka's form: 22 URL-safe base64 characters (16 bytes), as
    ``odradek storage random-uuid`` prints. A typo'd or made-up id would otherwise name a cluster forever."""
    decoded = b""
    if len(cluster_id) == 22 and _CLUSTER_ID.match(cluster_id):
        try:
            decoded = base64.urlsafe_b64decode(cluster_id + "==")
        except (binascii.Error, ValueError):
            decoded = b""
    if len(decoded) != 16:
        raise StorageFormatError(
            f"cluster id '{cluster_id}' is not a UUID: expected 22 URL-safe base64 characters "
            "(use 'odradek storage random-uuid')"
        )


def _read(path: Path) -> dict[str, str]:
    props = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def all_dirs(config: NodeConfig) -> list[Path]:
    dirs = [Path(d) for d in config.log_dirs] if config.is_broker else []
    meta = Path(config.metadata_log_dir)
    if meta not in dirs:
        dirs.append(meta)
    return dirs


def format_storage(config: NodeConfig, cluster_id: str, ignore_formatted: bool = False) -> list[Path]:
    """Write meta.properties in every log dir; return the dirs formatted now (skipping same-cluster ones)."""
    if not _CLUSTER_ID.match(cluster_id):
        raise StorageFormatError(f"cluster id '{cluster_id}' must be 1-64 letters, digits, '-' or '_'")
    formatted = []
    for directory in all_dirs(config):
        meta = directory / META_FILE
        if meta.exists():
            props = _read(meta)
            if props.get("cluster.id") == cluster_id and props.get("node.id") == str(config.node_id):
                if ignore_formatted:
                    continue
                raise StorageFormatError(f"{directory} is already formatted (use --ignore-formatted)")
            raise StorageFormatError(
                f"{directory} is formatted for cluster {props.get('cluster.id')} node {props.get('node.id')}"
            )
        directory.mkdir(parents=True, exist_ok=True)
        text = (
            "# written by odradek storage format\n"
            f"version=1\ncluster.id={cluster_id}\nnode.id={config.node_id}\ndirectory.id={uuid.uuid4()}\n"
        )
        _write_atomic(meta, text)
        formatted.append(directory)
    return formatted


def verify_storage(config: NodeConfig) -> str:
    """Check every log dir belongs to one cluster and to this node; return the cluster id."""
    cluster_ids = set()
    for directory in all_dirs(config):
        meta = directory / META_FILE
        if not meta.exists():
            raise StorageFormatError(f"{directory} is not formatted: run 'odradek storage format' first")
        props = _read(meta)
        if props.get("node.id") != str(config.node_id):
            raise StorageFormatError(f"{directory} belongs to node {props.get('node.id')}, not {config.node_id}")
        cluster_ids.add(props.get("cluster.id", ""))
    if len(cluster_ids) != 1:
        raise StorageFormatError(f"log dirs belong to different clusters: {', '.join(sorted(cluster_ids))}")
    return cluster_ids.pop()
