"""The admin service (topics, configs, elections and reassignments, the cluster and quorum, client quotas, ACLs,
SCRAM credentials) as every node serves it: ``service.NodeAdmin``, split by area into modules over ``base.py``,
taking the typed requests of ``odradek.client.common.admin`` and the caller's ``RequestContext``.

Reads are answered from the node's metadata image; writes are decided by the controller's pure functions
(``controller/topics.py``, ``config_changes.py``, ``acl_changes.py``, ...) and committed with
``ActiveController.write`` when this node is the active controller, else forwarded to it (``forwarding.py``). The
gRPC Admin servicer is an adapter around it (``grpc_adapter.py``, with the message translations of
``messages.py``), as are the Kafka listener's admin handlers on the broker side.
"""
