"""What the admin service takes and answers, whichever listener a request came in by: odradek's own frozen types,
one module per area (``topics``, ``configs``, ``acls``, ``quotas``, ``scram``, ``partitions`` for elections and
reassignments, ``cluster``), error codes as ints, and none of a protocol's encoding; ``api.AdminApi`` lists the
service's methods.

The service itself is the controller's (``odradek.controller.admin``): any node answers reads from its own metadata
image and forwards writes to the active controller. Its types are here, below both roles, so that the broker's
adapters (the Kafka listener's handlers, the HTTP API) call it through ``AdminApi`` without importing the
controller. Each listener's adapter translates its protocol's request into one of these and the answer back.

An answer to a write names ``metadata_offset``: the metadata log offset that covers the write (it and everything
committed before it), where the node that answered knows one; the gRPC adapter hands it on in the answer's trailing
metadata, so that a node forwarding to this one waits for its own image to reach it (read-your-writes).
"""
