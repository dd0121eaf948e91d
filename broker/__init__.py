"""odradek broker: partition logs, replication and the data-plane services."""
