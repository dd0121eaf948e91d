"""Topic creation refusals: settings odradek cannot honour yet are refused, never stored and ignored."""

import pytest
from controller_images import brokers, build

from odradek.client.errors import ErrorCode
from odradek.controller.topics import TopicRequest, create_topic


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"cleanup.policy": "compact"}, "cleanup.policy 'compact' is not supported yet: log compaction"),
        ({"cleanup.policy": "compact,delete"}, "cleanup.policy 'compact,delete' is not supported yet"),
        ({"delete.retention.ms": "1000"}, "topic config 'delete.retention.ms' is not supported yet"),
        ({"min.compaction.lag.ms": "0"}, "topic config 'min.compaction.lag.ms' is not supported yet"),
        ({"max.compaction.lag.ms": "10"}, "topic config 'max.compaction.lag.ms' is not supported yet"),
        ({"min.cleanable.dirty.ratio": "0.5"}, "topic config 'min.cleanable.dirty.ratio' is not supported yet"),
        ({"file.delete.delay.ms": "0"}, "topic config 'file.delete.delay.ms' is not supported yet"),
    ],
)
def test_unsupported_topic_configs_are_refused(configs: dict[str, str], message: str) -> None:
    image = build(brokers(1, 2, 3))
    out = create_topic(image, TopicRequest("t", 1, 1, configs))
    assert (out.error, out.records) == (ErrorCode.INVALID_CONFIG, [])
    assert message in out.message


def test_the_delete_cleanup_policy_stays_accepted() -> None:
    image = build(brokers(1, 2, 3))
    out = create_topic(image, TopicRequest("t", 1, 1, {"cleanup.policy": "delete"}))
    assert out.error == ErrorCode.NONE and out.records
