"""Automatic topic creation (``auto.create.topics.enable``): topics a Metadata request names that do not exist are
created, when the request allows it, through the admin service's CreateTopics (which forwards to the active
controller, as any CreateTopics) with this broker's ``num.partitions`` and ``default.replication.factor``.

The broker's Metadata service asks here for both listeners, and only for topics named one by one (a request for
every topic creates none). As Kafka's brokers do:

- with an authorizer, the caller needs Create on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED;
- a name Kafka refuses answers INVALID_TOPIC_EXCEPTION without asking the controller;
- an internal topic is never created this way (the cluster creates it on first use): UNKNOWN_TOPIC_OR_PARTITION;
- a topic whose creation the controller accepted, or that another request created meanwhile (TOPIC_ALREADY_EXISTS),
  answers LEADER_NOT_AVAILABLE: its partitions are not in this broker's image yet, and clients retry that error.
  So does a topic whose creation this broker has in flight already (no second request is sent), and one the
  controller could not be reached for (NOT_CONTROLLER, REQUEST_TIMED_OUT): the client's retry asks again.
  Any other refusal (INVALID_REPLICATION_FACTOR with fewer brokers than the default factor, POLICY_VIOLATION) is
  the topic's error.

The answer waits for the controller's, so such refusals reach the client: Kafka's KRaft brokers send the creation
without waiting and answer UNKNOWN_TOPIC_OR_PARTITION, which clients also retry, but which they cannot tell from a
topic that will never exist.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from odradek.client.common.access import OPEN, AccessControl
from odradek.client.common.acls import AclOperation, ResourceType
from odradek.client.common.admin.topics import CreatableTopic, CreateTopics, CreateTopicsAnswer
from odradek.client.common.request_context import RequestContext
from odradek.client.common.topic_rules import INTERNAL_TOPICS, validate_topic_name
from odradek.client.errors import ErrorCode, OdradekError

logger = logging.getLogger(__name__)

# How long a creation may take at the controller before the Metadata request is answered without it (Kafka's
# request.timeout.ms default is 30 s; a client's Metadata request should not wait that long for one topic).
CREATE_TIMEOUT_MS = 10_000

# Controller answers after which the topic exists, or may once the client asks again.
_RETRY_LATER = frozenset(
    {ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT}
)

CreateTopicsCall = Callable[[CreateTopics, RequestContext], Awaitable[CreateTopicsAnswer]]
"""The admin service's ``create_topics``, as the caller of the Metadata request: (request, its context) -> answer."""


class TopicAutoCreation:
    """Creates the missing topics Metadata requests name, with the node's topic defaults."""

    def __init__(
        self,
        create_topics: CreateTopicsCall,
        num_partitions: int,
        replication_factor: int,
        access: AccessControl = OPEN,
        timeout_ms: int = CREATE_TIMEOUT_MS,
    ) -> None:
        self.create_topics = create_topics
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.access = access
        self.timeout_ms = timeout_ms
        self._inflight: set[str] = set()  # topics whose creation this broker awaits

    async def create(self, names: Sequence[str], ctx: RequestContext) -> dict[str, ErrorCode.ValueType]:
        """The Metadata error of each of ``names`` (topics the image does not have, which the request may create)
        once their creation has been asked for: LEADER_NOT_AVAILABLE for those created or being created, else why
        not. ``ctx`` is the Metadata request's: the caller the creation is authorized as."""
        answers: dict[str, ErrorCode.ValueType] = {}
        names = list(dict.fromkeys(names))
        for name in self._create_denied(names, ctx):
            answers[name] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        creatable = []
        for name in names:
            if name in answers:
                continue
            if validate_topic_name(name) is not None:
                answers[name] = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif name in INTERNAL_TOPICS:
                answers[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif name in self._inflight:
                answers[name] = ErrorCode.LEADER_NOT_AVAILABLE
            else:
                creatable.append(name)
        if creatable:
            answers.update(await self._create(creatable, ctx))
        return answers

    def _create_denied(self, names: Sequence[str], ctx: RequestContext) -> set[str]:
        """The topics the caller may not create: all allowed with cluster Create, else those without topic Create
        (audited as the Metadata request's denials; the cluster check is not, as Kafka logs only the topic's)."""
        access = self.access
        if not access.enabled or not names:
            return set()
        caller = ctx.caller
        if access.allows_cluster(caller, AclOperation.CREATE, api="Metadata", audit_denial=False):
            return set()
        return access.denied(caller, AclOperation.CREATE, ResourceType.TOPIC, names, api="Metadata")

    async def _create(self, names: list[str], ctx: RequestContext) -> dict[str, ErrorCode.ValueType]:
        request = CreateTopics(
            topics=tuple(
                CreatableTopic(
                    name=name, num_partitions=self.num_partitions, replication_factor=self.replication_factor
                )
                for name in names
            ),
            timeout_ms=self.timeout_ms,
        )
        self._inflight.update(names)
        try:
            answer = await self.create_topics(request, ctx)
        except OdradekError as e:  # the whole request failed (no controller): the client's retry asks again
            logger.info("automatic creation of %s failed: %s", ", ".join(names), e)
            return dict.fromkeys(names, ErrorCode.LEADER_NOT_AVAILABLE)
        finally:
            self._inflight.difference_update(names)
        out = dict.fromkeys(names, ErrorCode.LEADER_NOT_AVAILABLE)
        for t in answer.topics:
            if t.name not in out:
                continue
            if t.error == ErrorCode.NONE:
                logger.info(
                    "created topic %s automatically (%d partitions, replication factor %d)",
                    t.name,
                    self.num_partitions,
                    self.replication_factor,
                )
            elif t.error not in _RETRY_LATER:
                logger.info("automatic creation of topic %s refused: %s", t.name, t.error_message or t.error)
            out[t.name] = ErrorCode.LEADER_NOT_AVAILABLE if t.error in _RETRY_LATER else ErrorCode.ValueType(t.error)
        return out
