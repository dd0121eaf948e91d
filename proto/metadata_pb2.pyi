from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BrokerEndpoint(_message.Message):
    __slots__ = ("host", "port")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class RegisterBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "incarnation_id", "broker_epoch", "endpoint", "rack", "fenced", "log_dirs")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    LOG_DIRS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    incarnation_id: bytes
    broker_epoch: int
    endpoint: BrokerEndpoint
    rack: str
    fenced: bool
    log_dirs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, broker_id: _Optional[int] = ..., incarnation_id: _Optional[bytes] = ..., broker_epoch: _Optional[int] = ..., endpoint: _Optional[_Union[BrokerEndpoint, _Mapping]] = ..., rack: _Optional[str] = ..., fenced: _Optional[bool] = ..., log_dirs: _Optional[_Iterable[str]] = ...) -> None: ...

class UnregisterBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class FenceBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class UnfenceBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerRegistrationChangeRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "in_controlled_shutdown")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    in_controlled_shutdown: bool
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., in_controlled_shutdown: _Optional[bool] = ...) -> None: ...

class TopicRecord(_message.Message):
    __slots__ = ("name", "topic_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: bytes
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[bytes] = ...) -> None: ...

class PartitionRecord(_message.Message):
    __slots__ = ("topic_id", "partition", "replicas", "isr", "leader", "leader_epoch", "partition_epoch", "adding_replicas", "removing_replicas", "eligible_leader_replicas", "last_known_elr", "last_known_leader")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_ELR_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_LEADER_FIELD_NUMBER: _ClassVar[int]
    topic_id: bytes
    partition: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    eligible_leader_replicas: _containers.RepeatedScalarFieldContainer[int]
    last_known_elr: _containers.RepeatedScalarFieldContainer[int]
    last_known_leader: int
    def __init__(self, topic_id: _Optional[bytes] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ..., eligible_leader_replicas: _Optional[_Iterable[int]] = ..., last_known_elr: _Optional[_Iterable[int]] = ..., last_known_leader: _Optional[int] = ...) -> None: ...

class PartitionChangeRecord(_message.Message):
    __slots__ = ("topic_id", "partition", "leader", "isr", "isr_changed", "replicas", "replicas_changed", "adding_replicas", "removing_replicas", "eligible_leader_replicas", "elr_changed", "last_known_elr", "leader_recovering")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    ISR_CHANGED_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ELR_CHANGED_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_ELR_FIELD_NUMBER: _ClassVar[int]
    LEADER_RECOVERING_FIELD_NUMBER: _ClassVar[int]
    topic_id: bytes
    partition: int
    leader: int
    isr: _containers.RepeatedScalarFieldContainer[int]
    isr_changed: bool
    replicas: _containers.RepeatedScalarFieldContainer[int]
    replicas_changed: bool
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    eligible_leader_replicas: _containers.RepeatedScalarFieldContainer[int]
    elr_changed: bool
    last_known_elr: _containers.RepeatedScalarFieldContainer[int]
    leader_recovering: bool
    def __init__(self, topic_id: _Optional[bytes] = ..., partition: _Optional[int] = ..., leader: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ..., isr_changed: _Optional[bool] = ..., replicas: _Optional[_Iterable[int]] = ..., replicas_changed: _Optional[bool] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ..., eligible_leader_replicas: _Optional[_Iterable[int]] = ..., elr_changed: _Optional[bool] = ..., last_known_elr: _Optional[_Iterable[int]] = ..., leader_recovering: _Optional[bool] = ...) -> None: ...

class ConfigRecord(_message.Message):
    __slots__ = ("resource_type", "resource_name", "name", "value")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    resource_type: int
    resource_name: str
    name: str
    value: str
    def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class ClientQuotaRecord(_message.Message):
    __slots__ = ("user", "has_user", "user_default", "client_id", "has_client_id", "client_id_default", "key", "value", "remove")
    USER_FIELD_NUMBER: _ClassVar[int]
    HAS_USER_FIELD_NUMBER: _ClassVar[int]
    USER_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    HAS_CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    user: str
    has_user: bool
    user_default: bool
    client_id: str
    has_client_id: bool
    client_id_default: bool
    key: str
    value: float
    remove: bool
    def __init__(self, user: _Optional[str] = ..., has_user: _Optional[bool] = ..., user_default: _Optional[bool] = ..., client_id: _Optional[str] = ..., has_client_id: _Optional[bool] = ..., client_id_default: _Optional[bool] = ..., key: _Optional[str] = ..., value: _Optional[float] = ..., remove: _Optional[bool] = ...) -> None: ...

class ProducerIdsRecord(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "next_producer_id")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEXT_PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    next_producer_id: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., next_producer_id: _Optional[int] = ...) -> None: ...

class RemoveTopicRecord(_message.Message):
    __slots__ = ("topic_id",)
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    topic_id: bytes
    def __init__(self, topic_id: _Optional[bytes] = ...) -> None: ...

class LeaderChangeRecord(_message.Message):
    __slots__ = ("leader_id", "leader_epoch", "voters")
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    leader_id: int
    leader_epoch: int
    voters: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., voters: _Optional[_Iterable[int]] = ...) -> None: ...

class MetadataRecord(_message.Message):
    __slots__ = ("register_broker", "unregister_broker", "fence_broker", "unfence_broker", "broker_registration_change", "topic", "partition", "partition_change", "config", "client_quota", "producer_ids", "remove_topic", "leader_change")
    REGISTER_BROKER_FIELD_NUMBER: _ClassVar[int]
    UNREGISTER_BROKER_FIELD_NUMBER: _ClassVar[int]
    FENCE_BROKER_FIELD_NUMBER: _ClassVar[int]
    UNFENCE_BROKER_FIELD_NUMBER: _ClassVar[int]
    BROKER_REGISTRATION_CHANGE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    PARTITION_CHANGE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    CLIENT_QUOTA_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_IDS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_TOPIC_FIELD_NUMBER: _ClassVar[int]
    LEADER_CHANGE_FIELD_NUMBER: _ClassVar[int]
    register_broker: RegisterBrokerRecord
    unregister_broker: UnregisterBrokerRecord
    fence_broker: FenceBrokerRecord
    unfence_broker: UnfenceBrokerRecord
    broker_registration_change: BrokerRegistrationChangeRecord
    topic: TopicRecord
    partition: PartitionRecord
    partition_change: PartitionChangeRecord
    config: ConfigRecord
    client_quota: ClientQuotaRecord
    producer_ids: ProducerIdsRecord
    remove_topic: RemoveTopicRecord
    leader_change: LeaderChangeRecord
    def __init__(self, register_broker: _Optional[_Union[RegisterBrokerRecord, _Mapping]] = ..., unregister_broker: _Optional[_Union[UnregisterBrokerRecord, _Mapping]] = ..., fence_broker: _Optional[_Union[FenceBrokerRecord, _Mapping]] = ..., unfence_broker: _Optional[_Union[UnfenceBrokerRecord, _Mapping]] = ..., broker_registration_change: _Optional[_Union[BrokerRegistrationChangeRecord, _Mapping]] = ..., topic: _Optional[_Union[TopicRecord, _Mapping]] = ..., partition: _Optional[_Union[PartitionRecord, _Mapping]] = ..., partition_change: _Optional[_Union[PartitionChangeRecord, _Mapping]] = ..., config: _Optional[_Union[ConfigRecord, _Mapping]] = ..., client_quota: _Optional[_Union[ClientQuotaRecord, _Mapping]] = ..., producer_ids: _Optional[_Union[ProducerIdsRecord, _Mapping]] = ..., remove_topic: _Optional[_Union[RemoveTopicRecord, _Mapping]] = ..., leader_change: _Optional[_Union[LeaderChangeRecord, _Mapping]] = ...) -> None: ...

class MetadataSnapshot(_message.Message):
    __slots__ = ("end_offset", "epoch", "cluster_id", "records")
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    end_offset: int
    epoch: int
    cluster_id: str
    records: _containers.RepeatedCompositeFieldContainer[MetadataRecord]
    def __init__(self, end_offset: _Optional[int] = ..., epoch: _Optional[int] = ..., cluster_id: _Optional[str] = ..., records: _Optional[_Iterable[_Union[MetadataRecord, _Mapping]]] = ...) -> None: ...

class MetadataBatch(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[MetadataRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[MetadataRecord, _Mapping]]] = ...) -> None: ...
