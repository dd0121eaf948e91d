"""What the runner and the CLI set up for ``late-requests`` and ``clock-skew``, without starting nodes: clients find
every broker's Kafka listener at a proxy port while followers fetch over gRPC, the fault is refused where it
cannot work, and the clock offset file is written atomically and recognised once the node logs it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from odradek.broker.config import NodeConfig
from odradek.chaos import clock_skew, runner
from odradek.chaos.nemesis import ALL_FAULTS, CLIENTS
from odradek.chaos.proxy import FaultProxy
from odradek.client.cli.main import main
from odradek.deploy.local import DevCluster


def test_clients_reach_every_kafka_listener_through_the_proxy(tmp_path: Path) -> None:
    cluster = DevCluster.create(tmp_path / "c", controllers=1, brokers=2)
    with FaultProxy() as proxy:
        servers = runner.route_kafka_listeners(cluster, proxy)
        brokers = [n for n in cluster.nodes if n.kafka_port]
        assert servers.split(",") == [f"{h}:{p}" for h, p in (proxy.address(CLIENTS, i + 1) for i in range(2))]
        for i, b in enumerate(brokers, start=1):
            config = NodeConfig.load(b.config)
            advertised = config.advertised_kafka_listener
            assert advertised is not None and (advertised.host, advertised.port) == proxy.address(CLIENTS, i)
            link = next(lk for lk in proxy.links if lk.address == proxy.address(CLIENTS, i))
            assert link.kafka and link.target == ("127.0.0.1", b.kafka_port)
            assert config["replica.fetch.protocol"] == "grpc"  # replication stays off the proxy
            assert config.advertised_broker_listener == config.broker_listener  # gRPC clients: unchanged
        assert proxy.nodes == [1, 2] and CLIENTS in proxy.exempt  # link faults never cut the clients


def test_late_requests_are_refused_where_they_cannot_work(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    run = runner.run
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("the run must not start"))
    with pytest.raises(ValueError, match=r"Kafka workloads \(kafka, kafka-group, kafka-txn, kafka-copy, kafka-share\)"):
        run(runner.RunOptions(faults=["late-requests"], workload="txn"))  # before anything is created
    with pytest.raises(ValueError, match="late-requests"):
        run(runner.RunOptions(faults=["late-requests"], workload="kafka-txn", tls=True))
    assert main(["chaos", "run", "--workload", "group", "--faults", "kill,late-requests"]) != 0
    assert "late-requests (need a kafka- workload)" in capsys.readouterr().err
    assert main(["chaos", "run", "--workload", "kafka", "--tls", "--faults", "late-requests"]) != 0
    assert "late-requests" in capsys.readouterr().err
    assert {"late-requests", "clock-skew"} <= set(ALL_FAULTS)


def test_all_faults_leave_late_requests_out_of_the_grpc_workloads(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[runner.RunOptions] = []

    def fake_run(options: runner.RunOptions, log=print) -> runner.RunResult:
        seen.append(options)
        raise RuntimeError("stop here")

    monkeypatch.setattr(runner, "run", fake_run)
    main(["chaos", "run", "--faults", "all"])
    main(["chaos", "run", "--workload", "kafka", "--faults", "all"])
    assert "late-requests" not in seen[0].faults and "clock-skew" in seen[0].faults
    assert "late-requests" in seen[1].faults


def test_the_offset_file_is_written_whole_and_seen_in_the_node_log(tmp_path: Path) -> None:
    path, log = tmp_path / "clock-offset", tmp_path / "node.log"
    offsets = [clock_skew.draw_offset(random.Random(seed)) for seed in range(200)]
    assert all(clock_skew.MIN_SKEW_S <= abs(o) <= clock_skew.MAX_SKEW_S for o in offsets)
    assert min(offsets) < -60 and max(offsets) > 60 and any(abs(o) < 10 for o in offsets)  # seconds to minutes
    clock_skew.skew(path, -42.5)
    assert path.read_text() == "-42.5\n" and [p.name for p in tmp_path.iterdir()] == ["clock-offset"]
    log.write_text("x node-4 WARNING odradek.client.common.clock: wall clock offset now +7.000 s (unsafe...)\n")
    mark = clock_skew.log_size(log)
    assert not clock_skew.seen_by(log, -42.5, mark)
    with log.open("a") as f:
        f.write("x node-4 WARNING odradek.client.common.clock: wall clock offset now -42.500 s (unsafe...)\n")
    assert clock_skew.seen_by(log, -42.5, mark) and not clock_skew.seen_by(log, 7.0, mark)
    clock_skew.unskew(path)
    clock_skew.unskew(path)  # idempotent
    assert not path.exists()
