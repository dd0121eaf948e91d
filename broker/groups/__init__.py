"""Consumer groups: the group coordinator's sans-I/O cores (membership, committed offsets, their records)."""
