import pytest

from odradek.client.config import ConsumerConfig, ProducerConfig
from odradek.client.errors import ConfigError, OdradekError

SERVERS = {"bootstrap.servers": "127.0.0.1:9092"}


def test_producer_defaults_are_kafkas() -> None:
    c = ProducerConfig.from_mapping(SERVERS)
    assert c.bootstrap_servers == ("127.0.0.1:9092",)
    assert (c.acks, c.linger_ms, c.batch_size, c.compression_type) == (-1, 5, 16384, "none")
    assert (c.buffer_memory, c.max_block_ms, c.max_in_flight_requests_per_connection) == (32 * 1024 * 1024, 60000, 5)
    assert (c.retries, c.delivery_timeout_ms, c.max_request_size) == (2**31 - 1, 120000, 1048576)
    assert (c.request_timeout_ms, c.metadata_max_age_ms, c.retry_backoff_ms) == (30000, 300000, 100)
    assert c.partitioner_ignore_keys is False


def test_consumer_defaults_are_kafkas() -> None:
    c = ConsumerConfig.from_mapping(SERVERS)
    assert (c.group_id, c.auto_offset_reset, c.isolation_level, c.check_crcs) == (
        None,
        "latest",
        "read_uncommitted",
        True,
    )
    assert (c.fetch_min_bytes, c.fetch_max_bytes, c.fetch_max_wait_ms) == (1, 52428800, 500)
    assert (c.max_partition_fetch_bytes, c.max_poll_records) == (1048576, 500)
    assert (c.group_instance_id, c.session_timeout_ms, c.heartbeat_interval_ms) == (None, 45000, 3000)
    assert (c.max_poll_interval_ms, c.auto_commit_interval_ms) == (300000, 5000)
    assert c.partition_assignment_strategy == ("range", "cooperative-sticky")
    assert c.enable_auto_commit is False  # no group.id: nothing to commit to


def test_group_configs_parse() -> None:
    c = ConsumerConfig.from_mapping(
        {
            **SERVERS,
            "group.id": "g",
            "group.instance.id": "host-1",
            "session.timeout.ms": "10000",
            "heartbeat.interval.ms": 1000,
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.auto.commit": "false",
        }
    )
    assert (c.group_id, c.group_instance_id, c.session_timeout_ms, c.heartbeat_interval_ms) == (
        "g",
        "host-1",
        10000,
        1000,
    )
    assert (c.partition_assignment_strategy, c.enable_auto_commit) == (("cooperative-sticky",), False)
    assert ConsumerConfig.from_mapping({**SERVERS, "group.id": "g"}).enable_auto_commit is True
    listed = ConsumerConfig.from_mapping({**SERVERS, "partition.assignment.strategy": ["roundrobin", "range"]})
    assert listed.partition_assignment_strategy == ("roundrobin", "range")


@pytest.mark.parametrize(("value", "expected"), [("all", -1), (-1, -1), ("-1", -1), (0, 0), ("1", 1), ("ALL", -1)])
def test_acks_forms(value: object, expected: int) -> None:
    assert ProducerConfig.from_mapping({**SERVERS, "acks": value}).acks == expected


def test_strings_from_properties_files_are_parsed() -> None:
    c = ProducerConfig.from_mapping(
        {
            "bootstrap.servers": ["a:1", "b:2"],
            "linger.ms": "20",
            "partitioner.ignore.keys": "TRUE",
            "compression.type": "Zstd",
        }
    )
    assert (c.bootstrap_servers, c.linger_ms, c.partitioner_ignore_keys, c.compression_type) == (
        ("a:1", "b:2"),
        20,
        True,
        "zstd",
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"linger.ns": 5}, "unknown producer config 'linger.ns' (did you mean 'linger.ms'?)"),
        ({"group.id": "g"}, "unknown producer config 'group.id'"),
        ({"acks": 2}, "acks must be 0, 1 or all (-1), got 2"),
        ({"acks": True}, "acks must be 0, 1 or all"),
        ({"linger.ms": -1}, "linger.ms must be an integer in [0,"),
        ({"linger.ms": 1.5}, "linger.ms must be an integer"),
        ({"batch.size": "big"}, "batch.size must be an integer"),
        ({"compression.type": "brotli"}, "compression.type must be one of none, gzip, snappy, lz4, zstd"),
        ({"partitioner.ignore.keys": "yes"}, "partitioner.ignore.keys must be true or false"),
        ({"max.in.flight.requests.per.connection": 0}, "max.in.flight.requests.per.connection must be an integer"),
        ({"delivery.timeout.ms": 1000}, "delivery.timeout.ms (1000) must be at least linger.ms + request.timeout.ms"),
        ({"bootstrap.servers": "nohost:x"}, "bootstrap.servers: bootstrap server 'nohost:x' is not host:port"),
        ({"bootstrap.servers": ""}, "bootstrap.servers: bootstrap.servers is empty"),
    ],
)
def test_bad_producer_configs(config: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_mapping({**SERVERS, **config})
    assert message in str(info.value)


def test_bootstrap_servers_is_required() -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.servers is required"):
        ConsumerConfig.from_mapping({})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"auto.offset.reset": "smallest"}, "auto.offset.reset must be one of latest, earliest, none"),
        ({"isolation.level": "serializable"}, "isolation.level must be one of read_uncommitted, read_committed"),
        ({"max.poll.records": 0}, "max.poll.records must be an integer in [1,"),
        ({"acks": 1}, "unknown consumer config 'acks'"),
        ({"group.id": ""}, "group.id must be a non-empty string"),
        ({"group.instance.id": "i"}, "group.instance.id needs a group.id"),
        ({"group.id": "g", "group.instance.id": "a b"}, "group.instance.id must be at most 249 characters"),
        ({"heartbeat.interval.ms": 45000}, "heartbeat.interval.ms (45000) must be lower than session.timeout.ms"),
        ({"session.timeout.ms": 0}, "session.timeout.ms must be an integer in [1,"),
        ({"max.poll.interval.ms": -1}, "max.poll.interval.ms must be an integer in [1,"),
        ({"auto.commit.interval.ms": -5}, "auto.commit.interval.ms must be an integer in [0,"),
        ({"enable.auto.commit": True}, "enable.auto.commit=true needs a group.id"),
        ({"partition.assignment.strategy": "sticky"}, "unknown assignor 'sticky'"),
        ({"partition.assignment.strategy": ""}, "at least one assignor is required"),
        ({"partition.assignment.strategy": "range,range"}, "an assignor is listed twice"),
        ({"partition.assignment.strategy": 3}, "must be a comma-separated list of assignor names"),
    ],
)
def test_bad_consumer_configs(config: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        ConsumerConfig.from_mapping({**SERVERS, **config})
    assert message in str(info.value)


def test_the_supported_values_of_refused_options_stay_accepted() -> None:
    """Both isolation levels are accepted (read_committed since transactions); group.id may be unset."""
    c = ConsumerConfig.from_mapping({**SERVERS, "group.id": None, "isolation.level": "read_uncommitted"})
    assert (c.group_id, c.isolation_level) == (None, "read_uncommitted")
    c = ConsumerConfig.from_mapping({**SERVERS, "isolation.level": "READ_COMMITTED"})
    assert c.isolation_level == "read_committed"


def test_config_error_is_one_clear_type() -> None:
    with pytest.raises(ValueError) as info:
        ProducerConfig.from_mapping({**SERVERS, "retries": -1})
    assert isinstance(info.value, ConfigError) and isinstance(info.value, OdradekError)
    assert info.value.code_name == "INVALID_CONFIG"
