"""The built-in schema registry: Confluent Schema Registry's REST API, served by every broker on its own listener
(``schema.registry.listeners``), its state in the compacted topic ``_schemas`` (docs/schema-registry.md)."""
