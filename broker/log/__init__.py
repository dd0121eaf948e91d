"""The partition log: segments, indexes, checkpoints, recovery and retention."""
