#!/usr/bin/env bash
# Install odradek on a fresh Debian/Ubuntu VM from a wheel, as one node of a cluster (docs/deploy.md).
#
# Creates the system user odradek, a venv at /opt/odradek/venv with the wheel installed, /etc/odradek and
# /var/lib/odradek (owned by odradek, mode 0750), and the systemd unit for the node's role. Safe to run again:
# it reinstalls the wheel (for an upgrade) and leaves existing configs and data alone. It neither formats storage
# nor starts the node: that needs the node's config, which it prints the steps for.
set -euo pipefail

readonly PREFIX=/opt/odradek
readonly VENV=$PREFIX/venv
readonly CONF_DIR=/etc/odradek
readonly DATA_DIR=/var/lib/odradek
readonly UNIT_DIR=/etc/systemd/system
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly SCRIPT_DIR

usage() {
    cat <<EOF
usage: $(basename "$0") ROLE WHEEL

Install odradek from WHEEL (built with: pip wheel --no-deps -w dist .) as a node with ROLE:
  controller   a voter of the metadata quorum
  broker       hosts partition replicas
  combined     both
Run as root on the VM, from a copy of the repository's deploy/ folder (the units are read from systemd/ beside
this script).
EOF
}

die() {
    echo "error: $*" >&2
    exit 1
}

main() {
    if [[ $# -eq 1 && ($1 == -h || $1 == --help) ]]; then
        usage
        exit 0
    fi
    if [[ $# -ne 2 ]]; then
        usage >&2
        exit 2
    fi
    local role=$1 wheel=$2
    case $role in
        controller | broker | combined) ;;
        *) die "unknown role '$role' (controller, broker or combined)" ;;
    esac
    [[ -f $wheel ]] || die "wheel $wheel not found"
    local unit="odradek-$role.service"
    [[ -f $SCRIPT_DIR/systemd/$unit ]] || die "unit $SCRIPT_DIR/systemd/$unit not found"
    [[ $(id -u) -eq 0 ]] || die "run as root"

    # python3-venv brings the pip that `python3 -m venv` bootstraps: Debian and Ubuntu ship python3 without it.
    if ! dpkg-query -W -f='${Status}' python3-venv 2>/dev/null | grep -q 'install ok installed'; then
        apt-get update -q
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv
    fi

    getent group odradek >/dev/null || groupadd --system odradek
    if ! id -u odradek >/dev/null 2>&1; then
        useradd --system --gid odradek --home-dir "$DATA_DIR" --no-create-home --shell /usr/sbin/nologin odradek
    fi
    install -d -o odradek -g odradek -m 0750 "$CONF_DIR" "$DATA_DIR"

    [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    # --force-reinstall --no-deps after the normal install: a rebuilt wheel of the same version replaces the old.
    "$VENV/bin/python" -m pip install -q "$wheel"
    "$VENV/bin/python" -m pip install -q --force-reinstall --no-deps "$wheel"

    install -m 0644 "$SCRIPT_DIR/systemd/$unit" "$UNIT_DIR/$unit"
    systemctl daemon-reload

    local version
    version=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("odradek"))')
    cat <<EOF
installed odradek $version in $VENV and $UNIT_DIR/$unit
next steps, as root (docs/deploy.md):
  1. copy the cluster description to $CONF_DIR/cluster.toml and write this node's config:
       $VENV/bin/odradek deploy config --cluster $CONF_DIR/cluster.toml --node-id ID --output $CONF_DIR/node.toml
  2. format its storage with the cluster's one id (the same on every node):
       runuser -u odradek -- $VENV/bin/odradek storage format --cluster-id CLUSTER_ID \\
           --config $CONF_DIR/node.toml --ignore-formatted
  3. start it (controllers before brokers) and enable it at boot:
       systemctl enable --now $unit
EOF
}

main "$@"
