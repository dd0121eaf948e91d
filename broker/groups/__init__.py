"""Consumer groups: the group coordinator's parts.

``group`` is the sans-I/O state machine of one classic group (membership, rebalances, generations, static
members), fed requests and a clock and returning the answers and appends to make; ``members`` and ``messages`` are
its member state and its frozen inputs and outputs. The coordinator's shell owns the I/O: it routes requests to the
group, appends what it asks to persist to the group's offsets partition, and arms a timer for its next deadline.
"""
