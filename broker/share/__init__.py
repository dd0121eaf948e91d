"""Share groups (KIP-932, "queues for Kafka"): the sans-I/O cores and their shells.

``partition`` is the state of one share-partition (which in-flight records are available, acquired under a lock
by a member, acknowledged or archived, and its start offset), ``state_records`` its durable form in
``__share_group_state`` (snapshots and updates, their codec, and the store that decides between them), ``group``
the membership of one share group (ShareGroupHeartbeat) with the ``simple`` assignor of ``assignor``; ``spans``
keeps offset ranges compact, ``sessions`` the members' share sessions. They take events with the time in
milliseconds and return answers, records to store and events to log.

Their shells serve share groups (``broker.py`` puts them together): ``leader`` (ShareFetch and ShareAcknowledge on
the partitions a broker leads) with ``persister`` (its reads and writes of the durable state), ``state_coordinator``
(the share coordinator on ``__share_group_state``), ``group_coordinator`` (membership beside the group coordinator)
and ``service`` (the APIs with their ACL checks, which the Kafka listener's ``share_apis`` translates into).
"""
