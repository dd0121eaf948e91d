"""The process test_crash.py kills: appends batches as leader, flushes now and then, and after each flush prints
what is now durable, one line per flush: ``flushed first:last:sha1,...`` (sha1 of the batch as stored)."""

import hashlib
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from log_batches import make_batch

from odradek.broker.log.config import LogConfig
from odradek.broker.log.manager import LogManager
from odradek.client.record.header import header_prefix

CONFIG = LogConfig(segment_bytes=32 * 1024, index_interval_bytes=1024, segment_index_bytes=4096)


def main(log_dir: str, seed: int) -> None:
    manager = LogManager([log_dir], CONFIG)
    log = manager.get_or_create_log("crash", 0)
    out = sys.stdout.buffer
    out.write(f"ready {log.log_end_offset} {int(log.offline)}\n".encode())
    out.flush()
    rng = random.Random(seed)
    epoch = (log.latest_epoch or 0) + 1  # every run is a new leader epoch
    pending = []
    while True:
        values = [rng.randbytes(rng.randint(0, 400)) for _ in range(rng.randint(1, 6))]
        batch = make_batch(values, timestamp=rng.randint(0, 10**6))
        info = log.append_as_leader(batch, epoch)
        stored = header_prefix(info.first_offset, len(batch) - 12, epoch) + batch[16:]
        pending.append(f"{info.first_offset}:{info.last_offset}:{hashlib.sha1(stored).hexdigest()}")
        if rng.random() < 0.2:
            log.flush()
            out.write(("flushed " + ",".join(pending) + "\n").encode())
            out.flush()
            pending.clear()
            if rng.random() < 0.2:
                manager.checkpoint()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
