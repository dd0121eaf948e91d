"""A broker that cannot reach a controller says so every few seconds, naming the addresses it tries."""

from __future__ import annotations

from odradek.broker.controller_reach import ControllerReach


def test_warns_every_interval_with_the_addresses_tried_then_reports_recovery() -> None:
    reach = ControllerReach(interval=5)
    assert reach.failed(0.0, 1, "h:1", "UNAVAILABLE") is None
    assert reach.failed(2.0, 2, "h:2", "DEADLINE_EXCEEDED") is None
    warning = reach.failed(5.0, 3, "h:3", "UNAVAILABLE")
    assert warning == (
        "no active controller reachable for 5 s; tried 1@h:1 (UNAVAILABLE), 2@h:2 (DEADLINE_EXCEEDED), 3@h:3 "
        "(UNAVAILABLE)"
    )
    assert reach.failed(7.0, 1, "h:1", "UNAVAILABLE") is None
    assert reach.failed(10.0, 2, "h:2", "NOT_CONTROLLER") == (
        "no active controller reachable for 10 s; tried 1@h:1 (UNAVAILABLE), 2@h:2 (NOT_CONTROLLER)"
    )
    assert reach.succeeded(11.0, 2, "h:2") == "reached active controller 2@h:2 after 11 s"
    assert reach.succeeded(12.0, 2, "h:2") is None


def test_short_blips_stay_quiet() -> None:
    reach = ControllerReach(interval=5)
    assert reach.failed(0.0, 1, "h:1", "UNAVAILABLE") is None
    assert reach.succeeded(1.0, 2, "h:2") is None
    assert reach.failed(3.0, 1, "h:1", "UNAVAILABLE") is None
    assert reach.failed(7.0, 1, "h:1", "UNAVAILABLE") is None  # 4 s into this outage: the earlier one ended
