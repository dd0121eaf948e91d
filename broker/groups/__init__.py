"""Consumer groups: the group coordinator's parts.

``group`` is the sans-I/O state machine of one classic group (membership, rebalances, generations, static
members), fed requests and a clock and returning the answers and appends to make; ``members`` and ``messages`` are
its member state and its frozen inputs and outputs. ``records`` is the codec of the ``__consumer_offsets`` records,
``offsets`` the committed offsets of one offsets partition, ``partitioner`` which partition holds a group. The
coordinator's shell owns the I/O: it routes requests to the group, appends what it asks to persist to the group's
offsets partition, and arms a timer for its next deadline.
"""
