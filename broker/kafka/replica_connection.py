"""A follower's connection to one leader's Kafka listener: the asyncio shell around ``replica_fetch``.

One connection per leader broker, one request in flight: connect when needed, send the frame, read one
size-prefixed answer within the fetch's timeout. Any error (refused connection, reset, timeout, a malformed answer)
closes the connection, so the next fetch starts on a fresh one with nothing half-read, and fails the fetch
(``FetchFailedError``), which the fetcher retries after its backoff, as it does a failed gRPC call. Fetches go in a
fetch session (``ReplicaSession``): after any error the next request is a full one, which opens a new session.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from collections.abc import Callable, Mapping

from odradek.broker.fetch_response import (
    FetchedPartition,
    FetchFailedError,
    FetchRefusedError,
    PartitionFetch,
    ReplicaFetchRequest,
)
from odradek.broker.fetch_session import (
    FETCH_SESSION_ID_NOT_FOUND,
    FETCH_SESSION_TOPIC_ID_ERROR,
    INVALID_FETCH_SESSION_EPOCH,
)
from odradek.broker.kafka.replica_fetch import (
    ReplicaFetchAnswer,
    ReplicaSession,
    decode_replica_fetch_response,
    encode_replica_fetch,
)
from odradek.broker.kafka.wire import ProtocolError
from odradek.client.common.metadata_image import MetadataImage

_SIZE = struct.Struct(">i")
# An answer may exceed the fetch's max_bytes by its first batch (a batch is never split); this slack bounds the
# buffer a corrupt size prefix can make the follower allocate.
ANSWER_SLACK_BYTES = 128 << 20
KAFKA = "kafka"
SESSION_ERRORS = frozenset({FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR})

Key = tuple[str, int]


class KafkaTransport:
    """Fetches from the leader at ``address`` (its advertised Kafka listener) as broker ``broker_id``; over TLS with
    the context ``tls`` gives for each connection (the leader's Kafka listener is SSL or SASL_SSL)."""

    def __init__(
        self,
        address: str,
        broker_id: int,
        image: Callable[[], MetadataImage],
        tls: Callable[[], ssl.SSLContext | None] = lambda: None,
    ) -> None:
        host, _, port = address.rpartition(":")
        self.host, self.port = host, int(port)
        self.target = (KAFKA, address)
        self.client_id = f"odradek-replica-{broker_id}"
        self._image = image
        self._tls = tls
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._correlation = 0
        self.connects = 0  # connections opened, for tests and logs
        self.session = ReplicaSession()

    async def send(
        self, request: ReplicaFetchRequest, timeout: float, changes: Mapping[Key, PartitionFetch] | None = None
    ) -> dict[Key, FetchedPartition]:
        """``changes``: the entries moved since the previous request (the fetcher's; see ReplicaSession.build)."""
        try:
            async with asyncio.timeout(timeout):
                answer = await self._exchange(request, changes)
                self.session.answered(answer.error_code, answer.session_id)
                if answer.error_code in SESSION_ERRORS:  # the session is gone (evicted, say): start one at once
                    answer = await self._exchange(request)
                    self.session.answered(answer.error_code, answer.session_id)
        # IncompleteReadError is an EOFError; ssl.SSLError (a refused certificate) an OSError
        except (OSError, EOFError, TimeoutError, ProtocolError) as e:
            self._drop()
            self.session.failed()
            raise FetchFailedError(f"{type(e).__name__}: {e}") from e
        except BaseException:  # cancelled mid-exchange: an answer may still be on its way, so do not reuse it
            self._drop()
            self.session.failed()
            raise
        if answer.error_code:
            raise FetchRefusedError(answer.error_code)
        return answer.partitions

    async def _exchange(
        self, request: ReplicaFetchRequest, changes: Mapping[Key, PartitionFetch] | None = None
    ) -> ReplicaFetchAnswer:
        if self._streams is None:
            context = self._tls()
            if context is None:
                self._streams = await asyncio.open_connection(self.host, self.port)
            else:
                self._streams = await asyncio.open_connection(
                    self.host, self.port, ssl=context, server_hostname=self.host
                )
            self.connects += 1
        reader, writer = self._streams
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        correlation = self._correlation
        image = self._image()
        session = self.session.build(request.topics, changes)
        writer.write(encode_replica_fetch(request, correlation, self.client_id, image.topic_ids.get, session))
        await writer.drain()
        (size,) = _SIZE.unpack(await reader.readexactly(_SIZE.size))
        if size < 0 or size > request.max_bytes + ANSWER_SLACK_BYTES:
            raise ProtocolError(f"an answer of size {size} to a fetch of at most {request.max_bytes} bytes")
        frame = await reader.readexactly(size)

        def name(topic_id: bytes) -> str | None:
            topic = image.topics.get(topic_id)
            return None if topic is None else topic.name

        return decode_replica_fetch_response(frame, correlation, name)

    def _drop(self) -> None:
        """Close the connection now (the transport finishes closing on its own)."""
        streams, self._streams = self._streams, None
        if streams is not None:
            streams[1].close()

    async def close(self) -> None:
        streams = self._streams
        self._drop()
        if streams is not None:
            with contextlib.suppress(OSError):
                await streams[1].wait_closed()
