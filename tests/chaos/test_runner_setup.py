"""What the runner sets up for the newer faults, without starting nodes: brokers reach the controllers only through
the proxy (controllers keep their direct addresses), and the fsync ledger key lands in broker configs."""

from __future__ import annotations

from pathlib import Path

from odradek.broker.config import NodeConfig
from odradek.chaos.proxy import FaultProxy
from odradek.chaos.runner import patch_config, route_controller_links
from odradek.deploy.local import DevCluster


def test_brokers_reach_controllers_through_the_proxy(tmp_path: Path) -> None:
    cluster = DevCluster.create(tmp_path / "c", controllers=3, brokers=2)
    with FaultProxy() as proxy:
        route_controller_links(cluster, proxy)
        controllers = {n.node_id: n for n in cluster.nodes if n.controller_port}
        for n in cluster.nodes:
            voters = NodeConfig.load(n.config).voters
            if n.controller_port:  # controllers: unchanged, direct
                direct = {(c, node.controller_port) for c, node in controllers.items()}
                assert {(v.node_id, v.port) for v in voters} == direct
                continue
            me = [m.node_id for m in cluster.nodes].index(n.node_id)
            for v in voters:
                peer = [m.node_id for m in cluster.nodes].index(v.node_id)
                assert (v.host, v.port) == proxy.address(me, peer)
                link = next(lk for lk in proxy.links if lk.address == (v.host, v.port))
                assert link.http2 and link.target == ("127.0.0.1", controllers[v.node_id].controller_port)
        assert len(proxy.links) == 2 * 3
        assert sorted(proxy.nodes) == list(range(5))  # host indices, as the netns network names them


def test_patch_config_keeps_other_keys(tmp_path: Path) -> None:
    cluster = DevCluster.create(tmp_path / "c", controllers=1, brokers=1)
    broker = cluster.nodes[1]
    before = NodeConfig.load(broker.config)
    patch_config(broker.config, {"unsafe.testing.fsync.ledger": str(tmp_path / "ledger")})
    after = NodeConfig.load(broker.config)
    assert after["unsafe.testing.fsync.ledger"] == str(tmp_path / "ledger")
    assert after.voters == before.voters and after.log_dirs == before.log_dirs
