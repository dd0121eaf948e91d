"""The cluster metadata image: the fold of the metadata log, shared by controllers and brokers."""
