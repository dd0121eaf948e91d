"""The runner's progress floor: a transactional run waits after its faults until enough transactions ended."""

from __future__ import annotations

import threading
import time

from odradek.chaos.history import History, TxnEnd
from odradek.chaos.runner import _await_transactions


def test_only_acknowledged_commits_and_aborts_count() -> None:
    history = History(
        [
            TxnEnd("p0-0", "commit", "invoke", process="p0"),
            TxnEnd("p0-0", "commit", "ok", process="p0"),
            TxnEnd("p0-1", "abort", "ok", process="p0"),
            TxnEnd("p0-2", "commit", "fail", "timed out", process="p0"),
            TxnEnd("p0-3", "fence", "ok", process="p0"),
        ]
    )
    assert _await_transactions(history, 2, 1, timeout=0) == (2, 1)
    started = time.monotonic()
    assert _await_transactions(history, 3, 0, timeout=0.3) == (2, 1)  # gives up after the timeout
    assert _await_transactions(history, 2, 2, timeout=0.3) == (2, 1)  # and waits for the aborts too
    assert time.monotonic() - started >= 0.3


def test_the_wait_ends_when_the_workload_gets_there() -> None:
    history = History()

    def workload() -> None:
        for i in range(3):
            time.sleep(0.1)
            history.append(TxnEnd(f"p0-{i}", "commit", "ok", process="p0"))

    thread = threading.Thread(target=workload)
    started = time.monotonic()
    thread.start()
    assert _await_transactions(history, 3, 0, timeout=10) == (3, 0)
    assert time.monotonic() - started < 5
    thread.join()
