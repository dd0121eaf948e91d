"""Kafka v2 RecordBatch format: encoding, decoding, compression and validation."""
