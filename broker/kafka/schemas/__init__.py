"""Kafka's message definitions, in the JSON format kafka-python's codec reads, of the APIs kafka-python 3.0.12 does
not define (the KIP-848 consumer group APIs and the KIP-932 share group APIs). Written from the fields of Kafka's own
definitions; the classes that load them are in ``consumer_group_apis``, ``share_apis`` and ``share_offset_apis``."""
