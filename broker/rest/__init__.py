"""The HTTP API on brokers (``http.listeners``, docs/http-api.md): Confluent REST Proxy v3's resources over the
broker's own services, odradek's bounded read of a partition's records, and the web console (``/ui/``,
docs/console.md) with the routes it uses."""
