"""The asyncio/gRPC shell around the Raft core: disk persistence, transport, and the driver loop."""
