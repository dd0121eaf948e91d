"""The protocol-neutral service layer: services that take a typed request of odradek's own and the caller's
``RequestContext``, and return a typed answer. The gRPC servicers and the Kafka listener's handlers are sibling
adapters around them, translating their wire messages and nothing else."""
