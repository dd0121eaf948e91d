"""The Kafka listener: Kafka's own binary protocol on the brokers, mapped onto the same broker and controller code
as the gRPC services, so that unmodified Kafka clients work (docs/kafka-protocol.md)."""
