"""Models the client library, the broker and the controller share: clocks, ACLs and the authorizer's engine, SCRAM
credentials, the metadata image, topic and group config rules, and file ranges.

This package sits below both node roles (as Kafka's ``org.apache.kafka.common`` ships in its clients library): it
imports only ``odradek.proto`` and the client's wire-level modules (errors, record format), so the broker and the
controller can share it without importing each other. It is not part of the client's public API.
"""
