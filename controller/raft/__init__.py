"""Raft for the metadata quorum, as a sans-I/O state machine (KIP-595 style: pull-based replication)."""
