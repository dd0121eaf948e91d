"""The orders application against a real odradek cluster: one marker line says what the test needs.

The ``odradek_cluster`` fixture comes from odradek's pytest plugin (installed with odradek); it starts one
controller and one broker as real processes, creates the ``orders`` topic with three partitions, and stops the
cluster when the test session ends.
"""

import pytest

from .orders import TOPIC, place_orders, totals


@pytest.mark.odradek_cluster(brokers=1, topics={TOPIC: 3})
def test_totals_sum_each_customers_orders(odradek_cluster) -> None:
    servers = odradek_cluster.bootstrap_servers
    partitions = place_orders(servers, [("alice", 500), ("bob", 700), ("alice", 250), ("carol", 100)])
    assert totals(servers) == {"alice": 750, "bob": 700, "carol": 100}
    assert partitions[0] == partitions[2]  # one customer's orders share a partition
