"""The fsync ledger behind the chaos harness's power-loss fault: it records what each fsync made durable, and
``lose_unsynced`` cuts a killed process's files back to exactly that, while a plain SIGKILL loses nothing."""

import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from odradek.broker.log import durability
from odradek.broker.log.durability import Loss, plan_losses, read_ledger
from odradek.broker.log.manager import LogManager

CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, sys.argv[3])
    from log_batches import make_batch
    from odradek.broker.log import durability
    from odradek.broker.log.config import LogConfig
    from odradek.broker.log.manager import LogManager

    durability.enable(sys.argv[2])
    manager = LogManager([sys.argv[1]], LogConfig(segment_bytes=4096, index_interval_bytes=256))
    log = manager.get_or_create_log("t", 0)
    for i in range(60):  # several rolls: sealed segments are fsynced
        log.append_as_leader(make_batch([bytes(100)]), 1)
    log.flush()
    flushed = log.log_end_offset
    for i in range(10):  # in the page cache only
        log.append_as_leader(make_batch([bytes(100)]), 1)
    print(flushed, log.log_end_offset, flush=True)
    time.sleep(60)
    """
)


def test_ledger_lines_and_plan() -> None:
    ledger = read_ledger("5 100 /d/a.log\n5 300 /d/a.log\n6 40 /d/b.index\n7 1")  # torn last line ignored
    assert ledger == {"/d/a.log": (5, 300), "/d/b.index": (6, 40)}
    files = [("/d/a.log", 5, 350), ("/d/b.index", 9, 40), ("/d/c.log", 8, 10), ("/d/e.log", 10, 0)]
    assert plan_losses(ledger, files) == [
        Loss("/d/a.log", 350, 300),  # written after its last fsync
        Loss("/d/b.index", 40, 0),  # another file at that path since (new inode): never fsynced
        Loss("/d/c.log", 10, 0),  # never fsynced
    ]


def test_a_rename_carries_the_durable_size_to_the_new_name() -> None:
    ledger = read_ledger("5 300 /d/0.log.cleaned\nR /d/0.log.cleaned\t/d/0.log.swap\nR /d/0.log.swap\t/d/0.log\n")
    assert ledger == {"/d/0.log": (5, 300)}
    assert plan_losses(ledger, [("/d/0.log", 5, 300)]) == []  # cleaned, fsynced, swapped in: nothing to lose
    assert read_ledger("R /d/x.log\t/d/y.log\n") == {}  # a never fsynced file renamed: still nothing durable


def test_a_compaction_swap_keeps_the_cleaned_segment_through_a_power_loss(tmp_path: Path) -> None:
    directory, ledger = tmp_path / "p", tmp_path / "ledger"
    directory.mkdir()
    cleaned = directory / "00000000000000000000.log.cleaned"
    cleaned.write_bytes(b"x" * 100)
    durability.enable(ledger)
    try:
        with cleaned.open("rb+") as f:
            durability.fsync(f.fileno())
        durability.rename(cleaned, directory / "00000000000000000000.log")
    finally:
        durability.disable()
    assert durability.lose_unsynced(ledger, [tmp_path]) == []
    assert (directory / "00000000000000000000.log").stat().st_size == 100


def test_off_by_default_records_nothing(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x")
    with path.open("rb+") as f:
        durability.fsync(f.fileno())  # plain fsync, no ledger configured
    assert durability._ledger_fd is None


def test_power_loss_keeps_what_was_fsynced_and_drops_the_rest(tmp_path: Path) -> None:
    log_dir, ledger = tmp_path / "data", tmp_path / "ledger"
    helpers = Path(__file__).parent
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(log_dir), str(ledger), str(helpers)], stdout=subprocess.PIPE, text=True
    )
    try:
        flushed, written = map(int, child.stdout.readline().split())
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert written > flushed
    shutil.copytree(log_dir, tmp_path / "killed")  # a plain SIGKILL: the page cache keeps everything

    losses = durability.lose_unsynced(ledger, [log_dir])
    assert losses and all(loss.durable < loss.size for loss in losses)
    assert durability.lose_unsynced(ledger, [log_dir]) == []  # idempotent
    assert recovered_end(tmp_path / "killed") == written
    # A roll among the unflushed appends fsyncs the sealed segment: that part survives too.
    assert flushed <= recovered_end(log_dir) < written


def recovered_end(directory: Path) -> int:
    manager = LogManager([directory])
    try:
        log = manager.get_log("t", 0)
        assert log is not None and not log.offline
        return log.log_end_offset
    finally:
        manager.close()
