"""An immutable metadata image and the delta that folds metadata records into the next image.

The image is what every node knows about the cluster at one metadata-log offset. Records are applied through a
``MetadataDelta`` (as Kafka's MetadataDelta) so that a batch of records copies only the topics and brokers it
touches; an image is never mutated, so readers on other tasks can hold one without locks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from odradek.client.common.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from odradek.client.common.scram import Mechanism, ScramCredential
from odradek.proto import common_pb2
from odradek.proto import metadata_pb2 as md

NO_LEADER = -1
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32  # Kafka's GROUP config resource (KIP-848 group configs)
CLUSTER_DEFAULT = ""  # the broker resource name of the cluster-wide dynamic defaults


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: bytes
    epoch: int
    host: str
    port: int
    rack: str = ""
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: tuple[str, ...] = ()
    # (name, host, port) of the broker's advertised listeners besides the gRPC one (``host``, ``port``): its Kafka
    # listener, so that any broker can tell Kafka clients where the others are.
    listeners: tuple[tuple[str, str, int], ...] = ()

    @property
    def active(self) -> bool:
        """May lead and be in ISRs: registered, unfenced, not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown

    def endpoint(self, name: str) -> tuple[str, int] | None:
        """The advertised (host, port) of the listener called ``name``; None if the broker registered none."""
        return next(((host, port) for n, host, port in self.listeners if n == name), None)


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    topic_id: bytes
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    eligible_leader_replicas: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
    last_known_leader: int = NO_LEADER  # while leaderless: who led last (for operators)

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: bytes
    partitions: Mapping[int, PartitionRegistration]


K = TypeVar("K")
V = TypeVar("V")
# A client quota entity: (user or None, user_default, client_id or None, client_id_default).
QuotaEntity = tuple[str | None, bool, str | None, bool]


def _frozen(mapping: dict[K, V]) -> Mapping[K, V]:
    return MappingProxyType(mapping)


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """Cluster metadata at ``offset`` (the last applied metadata-log offset, -1 for the empty image)."""

    offset: int = -1
    epoch: int = -1
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: _frozen({}))
    topics: Mapping[bytes, TopicImage] = field(default_factory=lambda: _frozen({}))
    topic_ids: Mapping[str, bytes] = field(default_factory=lambda: _frozen({}))
    # (resource type, resource name) -> {config name: value}
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: _frozen({}))
    # quota entity key (user, client_id as stored) -> {quota key: value}
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=lambda: _frozen({}))
    next_producer_id: int = 0
    # ACL id (16-byte UUID) -> binding
    acls: Mapping[bytes, AclBinding] = field(default_factory=lambda: _frozen({}))
    # (user, mechanism's SASL name) -> SCRAM credential
    scram_credentials: Mapping[tuple[str, str], ScramCredential] = field(default_factory=lambda: _frozen({}))

    def sorted_topics(self) -> list[TopicImage]:
        """Every topic in name order (``topic_ids`` and ``topics`` always hold the same topics)."""
        return [self.topics[self.topic_ids[name]] for name in sorted(self.topic_ids)]

    def topic(self, name: str) -> TopicImage | None:
        topic_id = self.topic_ids.get(name)
        return self.topics.get(topic_id) if topic_id is not None else None

    def partition(self, name: str, partition: int) -> PartitionRegistration | None:
        topic = self.topic(name)
        return topic.partitions.get(partition) if topic else None

    def topic_configs(self, name: str) -> Mapping[str, str]:
        return self.configs.get((TOPIC_RESOURCE, name), _frozen({}))

    def cluster_defaults(self) -> Mapping[str, str]:
        """The dynamic broker defaults every node applies over its config file (Kafka's ``--entity-default``)."""
        return self.configs.get((BROKER_RESOURCE, CLUSTER_DEFAULT), _frozen({}))

    def group_configs(self, group_id: str) -> Mapping[str, str]:
        """A group's own configs (consumer.session.timeout.ms, ...), as IncrementalAlterConfigs set them."""
        return self.configs.get((GROUP_RESOURCE, group_id), _frozen({}))

    def active_brokers(self) -> list[BrokerRegistration]:
        return [b for b in self.brokers.values() if b.active]

    def to_records(self) -> list[md.MetadataRecord]:
        """Records that rebuild this image from empty (the content of a snapshot)."""
        out: list[md.MetadataRecord] = []
        for b in self.brokers.values():
            out.append(
                md.MetadataRecord(
                    register_broker=md.RegisterBrokerRecord(
                        broker_id=b.broker_id,
                        incarnation_id=b.incarnation_id,
                        broker_epoch=b.epoch,
                        endpoint=md.BrokerEndpoint(host=b.host, port=b.port),
                        rack=b.rack,
                        fenced=b.fenced,
                        log_dirs=b.log_dirs,
                        listeners=listener_messages(b.listeners),
                    )
                )
            )
            if b.in_controlled_shutdown:
                out.append(
                    md.MetadataRecord(
                        broker_registration_change=md.BrokerRegistrationChangeRecord(
                            broker_id=b.broker_id, broker_epoch=b.epoch, in_controlled_shutdown=True
                        )
                    )
                )
        for t in self.topics.values():
            out.append(md.MetadataRecord(topic=md.TopicRecord(name=t.name, topic_id=t.topic_id)))
            for p in t.partitions.values():
                out.append(md.MetadataRecord(partition=partition_record(p)))
        for (rtype, rname), entries in self.configs.items():
            for name, value in entries.items():
                out.append(
                    md.MetadataRecord(
                        config=md.ConfigRecord(resource_type=rtype, resource_name=rname, name=name, value=value)
                    )
                )
        for entity, values in self.client_quotas.items():
            for key, quota in values.items():
                out.append(md.MetadataRecord(client_quota=quota_record(entity, key, quota)))
        for acl_id, binding in self.acls.items():
            out.append(md.MetadataRecord(access_control_entry=acl_record(acl_id, binding)))
        for (user, _), credential in self.scram_credentials.items():
            out.append(md.MetadataRecord(user_scram_credential=scram_record(user, credential)))
        if self.next_producer_id:
            out.append(md.MetadataRecord(producer_ids=md.ProducerIdsRecord(next_producer_id=self.next_producer_id)))
        return out


def listener_messages(listeners: Iterable[tuple[str, str, int]]) -> list[common_pb2.Listener]:
    return [common_pb2.Listener(name=name, host=host, port=port) for name, host, port in listeners]


def partition_record(p: PartitionRegistration) -> md.PartitionRecord:
    return md.PartitionRecord(
        topic_id=p.topic_id,
        partition=p.partition,
        replicas=p.replicas,
        isr=p.isr,
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch,
        adding_replicas=p.adding_replicas,
        removing_replicas=p.removing_replicas,
        eligible_leader_replicas=p.eligible_leader_replicas,
        last_known_elr=p.last_known_elr,
        last_known_leader=None if p.last_known_leader == NO_LEADER else p.last_known_leader,
    )


def quota_entity(r: md.ClientQuotaRecord) -> QuotaEntity:
    """A hashable quota entity: (user or None, user_default, client_id or None, client_id_default)."""
    return (
        r.user if r.has_user else None,
        r.user_default,
        r.client_id if r.has_client_id else None,
        r.client_id_default,
    )


def quota_record(entity: QuotaEntity, key: str, value: float, remove: bool = False) -> md.ClientQuotaRecord:
    user, user_default, client_id, client_default = entity
    return md.ClientQuotaRecord(
        user=user or "",
        has_user=user is not None,
        user_default=user_default,
        client_id=client_id or "",
        has_client_id=client_id is not None,
        client_id_default=client_default,
        key=key,
        value=value,
        remove=remove,
    )


def acl_record(acl_id: bytes, b: AclBinding) -> md.AccessControlEntryRecord:
    return md.AccessControlEntryRecord(
        id=acl_id,
        resource_type=b.resource_type,
        resource_name=b.resource_name,
        pattern_type=b.pattern_type,
        principal=b.principal,
        host=b.host,
        operation=b.operation,
        permission_type=b.permission,
    )


def acl_binding(r: md.AccessControlEntryRecord) -> AclBinding:
    return AclBinding(
        ResourceType.from_code(r.resource_type),
        r.resource_name,
        PatternType.from_code(r.pattern_type),
        r.principal,
        r.host,
        AclOperation.from_code(r.operation),
        AclPermissionType.from_code(r.permission_type),
    )


def scram_record(user: str, c: ScramCredential) -> md.UserScramCredentialRecord:
    return md.UserScramCredentialRecord(
        name=user,
        mechanism=c.mechanism.value,
        salt=c.salt,
        stored_key=c.stored_key,
        server_key=c.server_key,
        iterations=c.iterations,
    )


class MetadataDelta:
    """Accumulates records on top of a base image; ``image()`` produces the next image.

    Also records which topics, partitions and brokers changed, so brokers can act on just those (become
    leader/follower): ``changed_topics`` holds every topic with any change, ``changed_partitions`` the partitions
    that changed in each, and ``whole_topics`` the changed topics every partition of which is to be read again (new,
    their configs changed, or a snapshot replaced them).
    """

    def __init__(self, base: MetadataImage) -> None:
        self.base = base
        self._brokers: dict[int, BrokerRegistration] | None = None
        self._topics: dict[bytes, TopicImage] | None = None
        self._topic_ids: dict[str, bytes] | None = None
        self._partitions: dict[bytes, dict[int, PartitionRegistration]] = {}
        self._configs: dict[tuple[int, str], dict[str, str]] = {}
        self._configs_all: dict[tuple[int, str], Mapping[str, str]] | None = None
        self._quotas: dict[QuotaEntity, dict[str, float]] | None = None
        self._acls: dict[bytes, AclBinding] | None = None
        self._scram: dict[tuple[str, str], ScramCredential] | None = None
        self._next_producer_id = base.next_producer_id
        self._offset = base.offset
        self._epoch = base.epoch
        self.changed_topics: set[bytes] = set()
        self.changed_partitions: dict[bytes, set[int]] = {}
        self.whole_topics: set[bytes] = set()
        self.deleted_topics: dict[bytes, TopicImage] = {}
        self.changed_brokers: set[int] = set()

    # -- copy-on-write accessors --
    def brokers(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self.base.brokers)
        return self._brokers

    def topics(self) -> dict[bytes, TopicImage]:
        if self._topics is None:
            self._topics = dict(self.base.topics)
        return self._topics

    def topic_ids(self) -> dict[str, bytes]:
        if self._topic_ids is None:
            self._topic_ids = dict(self.base.topic_ids)
        return self._topic_ids

    def partitions(self, topic_id: bytes) -> dict[int, PartitionRegistration]:
        parts = self._partitions.get(topic_id)
        if parts is None:
            topic = self.topics().get(topic_id)
            parts = dict(topic.partitions) if topic else {}
            self._partitions[topic_id] = parts
        return parts

    def configs(self, key: tuple[int, str]) -> dict[str, str]:
        entries = self._configs.get(key)
        if entries is None:
            if self._configs_all is None:
                self._configs_all = dict(self.base.configs)
            entries = dict(self._configs_all.get(key, {}))
            self._configs[key] = entries
        return entries

    def current_partition(self, topic_id: bytes, partition: int) -> PartitionRegistration | None:
        return self.partitions(topic_id).get(partition)

    def mark_whole(self, topic_ids: Iterable[bytes]) -> None:
        """Every partition of these topics counts as changed."""
        topic_ids = set(topic_ids)
        self.changed_topics |= topic_ids
        self.whole_topics |= topic_ids

    def changed_in(self, topic: TopicImage) -> Iterable[PartitionRegistration]:
        """The partitions of a changed topic to act on: all of them for a whole topic, else those that changed."""
        if topic.topic_id in self.whole_topics:
            return topic.partitions.values()
        changed = self.changed_partitions.get(topic.topic_id, ())
        return [topic.partitions[i] for i in sorted(changed) if i in topic.partitions]

    def _partition_changed(self, topic_id: bytes, partition: int) -> None:
        self.changed_topics.add(topic_id)
        self.changed_partitions.setdefault(topic_id, set()).add(partition)

    # -- records --
    def replay(self, record: md.MetadataRecord, offset: int | None = None, epoch: int | None = None) -> None:
        kind = record.WhichOneof("record")
        if kind is None:
            raise ValueError("empty metadata record")
        getattr(self, "_replay_" + kind)(getattr(record, kind))
        if offset is not None:
            self._offset = offset
        if epoch is not None:
            self._epoch = epoch

    def set_position(self, offset: int, epoch: int) -> None:
        """The metadata-log position the next image reflects (the last applied offset and its epoch)."""
        self._offset, self._epoch = offset, epoch

    def replay_all(self, records: Iterable[md.MetadataRecord]) -> None:
        for record in records:
            self.replay(record)

    def _replay_register_broker(self, r: md.RegisterBrokerRecord) -> None:
        self.brokers()[r.broker_id] = BrokerRegistration(
            broker_id=r.broker_id,
            incarnation_id=r.incarnation_id,
            epoch=r.broker_epoch,
            host=r.endpoint.host,
            port=r.endpoint.port,
            rack=r.rack,
            fenced=r.fenced,
            log_dirs=tuple(r.log_dirs),
            listeners=tuple((li.name, li.host, li.port) for li in r.listeners),
        )
        self.changed_brokers.add(r.broker_id)

    def _update_broker(self, broker_id: int, epoch: int, **changes: Any) -> None:
        brokers = self.brokers()
        current = brokers.get(broker_id)
        if current is None or current.epoch != epoch:
            return  # a record for a superseded registration: nothing to change
        brokers[broker_id] = dataclasses.replace(current, **changes)
        self.changed_brokers.add(broker_id)

    def _replay_unregister_broker(self, r: md.UnregisterBrokerRecord) -> None:
        brokers = self.brokers()
        current = brokers.get(r.broker_id)
        if current is not None and current.epoch == r.broker_epoch:
            del brokers[r.broker_id]
            self.changed_brokers.add(r.broker_id)

    def _replay_fence_broker(self, r: md.FenceBrokerRecord) -> None:
        self._update_broker(r.broker_id, r.broker_epoch, fenced=True)

    def _replay_unfence_broker(self, r: md.UnfenceBrokerRecord) -> None:
        self._update_broker(r.broker_id, r.broker_epoch, fenced=False, in_controlled_shutdown=False)

    def _replay_broker_registration_change(self, r: md.BrokerRegistrationChangeRecord) -> None:
        self._update_broker(r.broker_id, r.broker_epoch, in_controlled_shutdown=r.in_controlled_shutdown)

    def _replay_topic(self, r: md.TopicRecord) -> None:
        self.topics()[r.topic_id] = TopicImage(r.name, r.topic_id, _frozen({}))
        self.topic_ids()[r.name] = r.topic_id
        self._partitions[r.topic_id] = {}
        self.mark_whole([r.topic_id])

    def _replay_partition(self, r: md.PartitionRecord) -> None:
        self.partitions(r.topic_id)[r.partition] = PartitionRegistration(
            topic_id=r.topic_id,
            partition=r.partition,
            replicas=tuple(r.replicas),
            isr=tuple(r.isr),
            leader=r.leader,
            leader_epoch=r.leader_epoch,
            partition_epoch=r.partition_epoch,
            adding_replicas=tuple(r.adding_replicas),
            removing_replicas=tuple(r.removing_replicas),
            eligible_leader_replicas=tuple(r.eligible_leader_replicas),
            last_known_elr=tuple(r.last_known_elr),
            last_known_leader=r.last_known_leader if r.HasField("last_known_leader") else NO_LEADER,
        )
        self._partition_changed(r.topic_id, r.partition)

    def _replay_partition_change(self, r: md.PartitionChangeRecord) -> None:
        parts = self.partitions(r.topic_id)
        current = parts.get(r.partition)
        if current is None:
            raise ValueError(f"partition change for unknown partition {r.partition}")
        changes: dict[str, Any] = {"partition_epoch": current.partition_epoch + 1}
        if r.HasField("leader") and r.leader != current.leader:
            changes["leader"] = r.leader
            changes["leader_epoch"] = current.leader_epoch + 1
            changes["last_known_leader"] = current.leader if r.leader == NO_LEADER else NO_LEADER
        if r.isr_changed:
            changes["isr"] = tuple(r.isr)
        if r.replicas_changed:
            changes["replicas"] = tuple(r.replicas)
            changes["adding_replicas"] = tuple(r.adding_replicas)
            changes["removing_replicas"] = tuple(r.removing_replicas)
        if r.elr_changed:
            changes["eligible_leader_replicas"] = tuple(r.eligible_leader_replicas)
            changes["last_known_elr"] = tuple(r.last_known_elr)
        parts[r.partition] = dataclasses.replace(current, **changes)
        self._partition_changed(r.topic_id, r.partition)

    def _replay_config(self, r: md.ConfigRecord) -> None:
        if r.resource_type == TOPIC_RESOURCE:
            topic_id = self.topic_ids().get(r.resource_name)
            if topic_id is not None:  # hosts of the topic's partitions re-read its configs
                self.mark_whole([topic_id])
        entries = self.configs((r.resource_type, r.resource_name))
        if r.HasField("value"):
            entries[r.name] = r.value
        else:
            entries.pop(r.name, None)

    def _replay_client_quota(self, r: md.ClientQuotaRecord) -> None:
        if self._quotas is None:
            self._quotas = {k: dict(v) for k, v in self.base.client_quotas.items()}
        entity = quota_entity(r)
        values = self._quotas.setdefault(entity, {})
        if r.remove:
            values.pop(r.key, None)
            if not values:
                del self._quotas[entity]
        else:
            values[r.key] = r.value

    def _replay_access_control_entry(self, r: md.AccessControlEntryRecord) -> None:
        if self._acls is None:
            self._acls = dict(self.base.acls)
        self._acls[r.id] = acl_binding(r)

    def _replay_remove_access_control_entry(self, r: md.RemoveAccessControlEntryRecord) -> None:
        if self._acls is None:
            self._acls = dict(self.base.acls)
        self._acls.pop(r.id, None)

    def _replay_user_scram_credential(self, r: md.UserScramCredentialRecord) -> None:
        if self._scram is None:
            self._scram = dict(self.base.scram_credentials)
        mechanism = Mechanism.parse(r.mechanism)
        self._scram[(r.name, mechanism.value)] = ScramCredential(
            mechanism, r.salt, r.iterations, r.stored_key, r.server_key
        )

    def _replay_remove_user_scram_credential(self, r: md.RemoveUserScramCredentialRecord) -> None:
        if self._scram is None:
            self._scram = dict(self.base.scram_credentials)
        self._scram.pop((r.name, r.mechanism), None)

    def _replay_producer_ids(self, r: md.ProducerIdsRecord) -> None:
        self._next_producer_id = max(self._next_producer_id, r.next_producer_id)

    def _replay_remove_topic(self, r: md.RemoveTopicRecord) -> None:
        topic = self.topics().pop(r.topic_id, None)
        if topic is None:
            return
        self.topic_ids().pop(topic.name, None)
        self._partitions.pop(r.topic_id, None)
        self.changed_topics.discard(r.topic_id)
        self.changed_partitions.pop(r.topic_id, None)
        self.whole_topics.discard(r.topic_id)
        self.deleted_topics[r.topic_id] = topic
        self._configs[(TOPIC_RESOURCE, topic.name)] = {}

    def _replay_leader_change(self, r: md.LeaderChangeRecord) -> None:
        """Raft bookkeeping; it changes nothing in the image."""

    def image(self) -> MetadataImage:
        base = self.base
        topics = base.topics
        if self._topics is not None or self._partitions:
            topics_dict = self.topics()
            for topic_id, parts in self._partitions.items():
                topic = topics_dict.get(topic_id)
                if topic is not None:
                    topics_dict[topic_id] = TopicImage(topic.name, topic_id, _frozen(parts))
            topics = _frozen(topics_dict)
        configs = base.configs
        if self._configs:
            merged = dict(self._configs_all if self._configs_all is not None else base.configs)
            for key, entries in self._configs.items():
                if entries:
                    merged[key] = _frozen(entries)
                else:
                    merged.pop(key, None)
            configs = _frozen(merged)
        return MetadataImage(
            offset=self._offset,
            epoch=self._epoch,
            brokers=_frozen(self._brokers) if self._brokers is not None else base.brokers,
            topics=topics,
            topic_ids=_frozen(self._topic_ids) if self._topic_ids is not None else base.topic_ids,
            configs=configs,
            client_quotas=(
                _frozen({k: _frozen(v) for k, v in self._quotas.items()})
                if self._quotas is not None
                else base.client_quotas
            ),
            next_producer_id=self._next_producer_id,
            acls=_frozen(self._acls) if self._acls is not None else base.acls,
            scram_credentials=_frozen(self._scram) if self._scram is not None else base.scram_credentials,
        )


def image_from_records(records: Iterable[md.MetadataRecord], offset: int = -1, epoch: int = -1) -> MetadataImage:
    delta = MetadataDelta(MetadataImage())
    delta.replay_all(records)
    delta.set_position(offset, epoch)
    return delta.image()


class LeaderView(Protocol):
    """Who leads the metadata quorum as a node sees it (the controller's ``LeaderAndEpoch``)."""

    @property
    def leader_id(self) -> int | None: ...


class MetadataFeed(Protocol):
    """What a broker's parts read of its node's metadata state machine: the current image, each change to it, and
    the quorum's leader. The controller package implements it; the broker takes it from the node's wiring, so it
    never imports the controller."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def leader(self) -> LeaderView: ...

    def on_change(self, listener: Callable[[MetadataImage, MetadataDelta], None]) -> None: ...
