"""odradek client: producer, consumer, admin, the record format and the CLI."""
