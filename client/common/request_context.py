"""Who sent a request, and through which listener: the one value every service takes along with a typed request.

Each listener's adapter builds it from what its protocol knows (the gRPC call's peer, metadata and the principal its
interceptors established; the Kafka connection and request header; the HTTP session) and passes it explicitly, so
a service authorizes (``caller``), charges quotas (``quota_user``, ``client_id``, ``peer``) and names group members
the same way whichever protocol a request came in by.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.client.common.caller import ANONYMOUS, UNKNOWN_HOST, Caller, peer_host

GRPC = "grpc"
KAFKA = "kafka"
HTTP = "http"
INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class RequestContext:
    principal: str = ANONYMOUS  # ``User:<name>``: whom the listener authenticated
    client_id: str = ""
    # The connection as gRPC names it (``ipv4:10.0.0.1:5000``, ``ipv6:[::1]:5000``): a quota mute and a classic
    # group member's host key on it.
    peer: str = ""
    listener: str = INTERNAL  # GRPC, KAFKA, HTTP, or INTERNAL for a node's own calls
    # False for requests that quotas do not apply to: another broker's (replication, markers), a node's own.
    quotas_apply: bool = True
    # time.monotonic() by which the caller gives up (a gRPC call's deadline); None: it set none. A service that waits
    # on something it need not wait for (a forwarded write's read-your-writes) keeps its answer within it.
    deadline: float | None = None
    # Called once a produce's batches are appended, before it waits for their replication: a listener that serves a
    # connection's requests in order may start the next one then (the Kafka listener's pipelining). None: nobody.
    appended: Callable[[], None] | None = field(default=None, compare=False, repr=False)

    @property
    def host(self) -> str:
        """The client's IP address in canonical text, as ACL host patterns match it (``*`` when it has none)."""
        return peer_host(self.peer) if self.peer else UNKNOWN_HOST

    @property
    def caller(self) -> Caller:
        """Whom to authorize the request as."""
        return Caller(self.principal, self.host)


def internal(principal: str = ANONYMOUS) -> RequestContext:
    """A node's own call into a service (a coordinator loading, a forwarded write): no peer, no quotas."""
    return RequestContext(principal=principal, listener=INTERNAL, quotas_apply=False)
