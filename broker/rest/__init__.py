"""The HTTP API on brokers (``http.listeners``, docs/http-api.md): Confluent REST Proxy v3's resources over the
broker's own services, and odradek's bounded read of a partition's records."""
