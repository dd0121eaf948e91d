"""Chaos harness: fault injection, workloads and the no-loss checker."""
