"""``odradek chaos run --tls`` wiring, without a chaos run: the option reaches the runner, every client of the
workloads carries the cluster's TLS keys, and the nemesis's own gRPC probe gets through a listener that requires a
client certificate."""

from __future__ import annotations

from concurrent import futures
from pathlib import Path

import grpc
import pytest

from odradek.chaos import runner
from odradek.chaos.group_workload import GroupWorkload
from odradek.chaos.history import History
from odradek.chaos.nemesis import probe_channel
from odradek.chaos.txn_workload import TxnWorkload
from odradek.chaos.workload import Workload
from odradek.client.cli.main import main
from odradek.deploy.local import DevCluster
from odradek.deploy.process import free_port
from odradek.proto import group_pb2 as gpb
from odradek.proto import group_pb2_grpc

TLS_KEYS = {"security.protocol", "ssl.ca.location", "ssl.certificate.location", "ssl.key.location"}


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> DevCluster:
    return DevCluster.create(tmp_path_factory.mktemp("tls") / "c", controllers=1, brokers=1, tls=True)


def test_the_cli_option_reaches_the_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[runner.RunOptions] = []

    def fake_run(options: runner.RunOptions, log=print) -> runner.RunResult:
        seen.append(options)
        raise RuntimeError("stop here")

    monkeypatch.setattr(runner, "run", fake_run)
    main(["chaos", "run", "--tls", "--faults", "kill"])
    main(["chaos", "run", "--faults", "kill"])
    assert [o.tls for o in seen] == [True, False]


def test_response_faults_are_refused_with_tls(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    run = runner.run
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("the run must not start"))
    assert main(["chaos", "run", "--tls", "--faults", "kill,lost-responses"]) != 0
    assert "lost-responses" in capsys.readouterr().err
    with pytest.raises(ValueError, match="late-responses"):
        run(runner.RunOptions(faults=["late-responses"], tls=True))  # before anything is created


def test_every_workload_client_gets_the_security_keys(tls_cluster: DevCluster) -> None:
    security = tls_cluster.security_config()
    assert set(security) == TLS_KEYS
    args = (tls_cluster.bootstrap_servers, "t", 2, History())
    plain = Workload(*args).client_config({"acks": "all"})
    assert not TLS_KEYS & set(plain) and plain["acks"] == "all"
    assert Workload(*args, security=security).client_config({"acks": "all"}).items() >= security.items()
    group = GroupWorkload(*args, security=security)
    assert group.member_config("g0.0").items() >= security.items()
    txn = TxnWorkload(*args, security=security)
    for config in (txn.producer_config(0, 0), txn.reader_config("r0"), txn.reader_config("r", committed=False)):
        assert config.items() >= security.items()
        assert config["bootstrap.servers"] == tls_cluster.bootstrap_servers


class _Coordinator(group_pb2_grpc.GroupCoordinatorServicer):
    def FindCoordinator(self, request, context):
        return gpb.FindCoordinatorResponse(coordinators=[gpb.Coordinator(node_id=7)])


def test_the_nemesis_probe_passes_a_listener_requiring_client_certificates(tls_cluster: DevCluster) -> None:
    node = tls_cluster.nodes[-1]
    tls = Path(tls_cluster.security_config()["ssl.ca.location"])
    credentials = grpc.ssl_server_credentials(
        [((node.directory / "node.key").read_bytes(), (node.directory / "node.crt").read_bytes())],
        root_certificates=tls.read_bytes(),
        require_client_auth=True,
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    group_pb2_grpc.add_GroupCoordinatorServicer_to_server(_Coordinator(), server)
    port = free_port()
    server.add_secure_port(f"127.0.0.1:{port}", credentials)
    server.start()
    try:
        request = gpb.FindCoordinatorRequest(key_type=gpb.GROUP, keys=["g"])
        with probe_channel(tls_cluster, f"127.0.0.1:{port}") as channel:
            found = group_pb2_grpc.GroupCoordinatorStub(channel).FindCoordinator(request, timeout=5)
        assert found.coordinators[0].node_id == 7
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, pytest.raises(grpc.RpcError):
            group_pb2_grpc.GroupCoordinatorStub(channel).FindCoordinator(request, timeout=2)
    finally:
        server.stop(None)
