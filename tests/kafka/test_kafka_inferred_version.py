"""The Kafka version clients infer from odradek's ApiVersions answer. Most clients negotiate each request instead,
but kafka-python picks its behaviour from an inferred broker version: it must read odradek as the Kafka version
odradek serves the protocol of (3.9), not an older one whose quirks it would then work around."""

from __future__ import annotations

from unittest import mock

from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

from odradek.broker.kafka.catalog import kafka_apis


def test_kafka_python_reads_odradek_as_kafka_3_9() -> None:
    registry = kafka_apis(mock.MagicMock(), sasl=True)
    versions = {spec.key: (spec.min_version, spec.max_version) for spec in registry.specs()}
    assert infer_broker_version_from_api_versions(versions) == (3, 9)
