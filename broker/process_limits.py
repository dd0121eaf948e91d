"""The process limits a broker sizes itself by: open files and memory mappings.

A broker raises its soft open-file limit to the hard one at start, as the JVM does for Kafka's brokers
(``-XX:+MaxFDLimit``): the soft limit of a login shell (often 1,024) is far below what thousands of partitions and
connections need, while the hard limit is what the operator allowed."""

from __future__ import annotations

import logging
import resource
from pathlib import Path

log = logging.getLogger(__name__)

MAX_MAP_COUNT = Path("/proc/sys/vm/max_map_count")


def raise_open_file_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (where allowed); the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as e:  # an unlimited hard limit may exceed the kernel's nr_open
            log.warning("could not raise the open-file limit from %d to %d: %s", soft, hard, e)
    return soft


def max_map_count() -> int | None:
    """The kernel's bound on a process's memory mappings, or None where it cannot be read (not Linux)."""
    try:
        return int(MAX_MAP_COUNT.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
