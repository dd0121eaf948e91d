"""Share groups (KIP-932, "queues for Kafka"): the sans-I/O cores.

``partition`` is the state of one share-partition (which in-flight records are available, acquired under a lock
by a member, acknowledged or archived, and its start offset), ``state_records`` its durable form in
``__share_group_state`` (snapshots and updates, their codec, and the store that decides between them), ``group``
the membership of one share group (ShareGroupHeartbeat) with the ``simple`` assignor of ``assignor``; ``spans``
keeps offset ranges compact. They take events with the time in milliseconds and return answers, records to store
and events to log; the shells that will serve them on the Kafka listener are not written yet.
"""
