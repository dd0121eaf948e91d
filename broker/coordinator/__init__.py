"""The coordinator runtime: one asyncio machinery under the group and the transaction coordinators (runtime.py),
its pure decisions (decisions.py) and the coordinators' clock (clock.py)."""
