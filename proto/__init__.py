"""Generated protobuf and gRPC code for the odradek.v1 wire protocol (see *.proto)."""
