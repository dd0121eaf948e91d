"""A node's TLS, from its ssl.* settings: server credentials for its gRPC listeners and an ``ssl.SSLContext`` for
its Kafka listener, both reloading the PEM files when they change, and the client side of its connections to other
nodes, which presents the node's own certificate (mTLS between nodes).

Reload without restart: gRPC calls the certificate-configuration fetcher of ``grpc.dynamic_ssl_server_credentials``
before every new connection's handshake; the fetcher answers a fresh configuration when the files' stat changed.
The Kafka listener asks ``ReloadingServerContext.current`` at each accept, which builds a new context on change.
Existing connections keep the certificate they were opened with. A rotation half done (key and certificate not a
pair yet) keeps the previous material and logs a warning; the next change is tried again.

Client certificates (per listener: ``listener.name.<name>.ssl.client.auth``, else ``ssl.client.auth``):
``required`` refuses a connection without a certificate that the CA (``ssl.ca.location``) signed and that is within
its validity; ``requested`` (Kafka listener only: grpcio's server credentials have no such mode) asks for one and
verifies it when given; ``none`` does not ask.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Callable
from typing import cast

import grpc

from odradek.broker.config import TLS_PROTOCOLS, ConfigError, NodeConfig
from odradek.client.tls import TlsFileError, TlsFiles, load_identity, read_key, read_pem

logger = logging.getLogger(__name__)

_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

Stamp = tuple[tuple[int, int, int], ...]


class FileWatch:
    """Whether any of some files changed since the last look (by inode, size and mtime, as a rename of a new file
    into place or a rewrite in place both change one)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = [p for p in paths if p]
        self._seen = self.stamp()

    def stamp(self) -> Stamp:
        out = []
        for path in self.paths:
            try:
                st = os.stat(path)
            except OSError:
                out.append((0, 0, 0))
                continue
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        return tuple(out)

    def changed(self) -> bool:
        """True once per change (the new stamp becomes the seen one)."""
        now = self.stamp()
        if now == self._seen:
            return False
        self._seen = now
        return True


class ServerTls:
    """The server side of TLS for one listener: the node's certificate (the same on every secure listener) and the
    listener's client authentication. Each listener has its own, so that each watches the files for itself (a
    watch reports a change once)."""

    def __init__(self, files: TlsFiles, client_auth: str) -> None:
        self.files = files
        self.client_auth = client_auth
        self._grpc_watch = FileWatch([files.certificate_location, files.key_location, files.ca_location])
        self._kafka_watch = FileWatch([files.certificate_location, files.key_location, files.ca_location])
        self._kafka: ssl.SSLContext | None = None
        self.reloads = 0  # material reloaded after a change, for tests and logs

    # -- gRPC ----------------------------------------------------------------------------------------------------

    def _grpc_configuration(self) -> grpc.ServerCertificateConfiguration:
        key = read_key(self.files.key_location, self.files.key_password)
        chain = read_pem(self.files.certificate_location, "ssl.certificate.location")
        _check_pair(self.files)  # a key that is not the certificate's would fail every handshake: refuse it here
        return grpc.ssl_server_certificate_configuration([(key, chain)], self.files.root_pem())

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """gRPC's fetcher: a new configuration after the files changed, else None (keep the current one). It must
        not raise (gRPC would fail the handshake)."""
        if not self._grpc_watch.changed():
            return None
        try:
            configuration = self._grpc_configuration()
        except TlsFileError as e:
            logger.warning("TLS: keeping the current certificate on the gRPC listeners: %s", e)
            return None
        self.reloads += 1
        logger.info("TLS: reloaded %s for the gRPC listeners", self.files.certificate_location)
        return configuration

    def grpc_credentials(self) -> grpc.ServerCredentials:
        if self.client_auth == "requested":  # NodeConfig refuses it for gRPC listeners; this guards misuse
            raise ConfigError("ssl.client.auth=requested is not supported on gRPC listeners")
        # grpcio's stub types the fetcher as always answering a configuration; None ("no change") is documented.
        fetch = cast(Callable[[], grpc.ServerCertificateConfiguration], self._fetch)
        return grpc.dynamic_ssl_server_credentials(
            self._grpc_configuration(), fetch, require_client_authentication=self.client_auth == "required"
        )

    # -- Kafka listener ------------------------------------------------------------------------------------------

    def _new_kafka_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        load_identity(context, self.files)
        context.verify_mode = _VERIFY[self.client_auth]
        root = self.files.root_pem()
        if root is not None:
            context.load_verify_locations(cadata=root.decode())
        return context

    def current(self) -> ssl.SSLContext:
        """The context for the next handshake, rebuilt when the files changed."""
        if self._kafka is None:
            self._kafka = self._new_kafka_context()
            self._kafka_watch.changed()
        elif self._kafka_watch.changed():
            try:
                self._kafka = self._new_kafka_context()
            except TlsFileError as e:
                logger.warning("TLS: keeping the current certificate on the Kafka listener: %s", e)
            else:
                self.reloads += 1
                logger.info("TLS: reloaded %s for the Kafka listener", self.files.certificate_location)
        return self._kafka


def _check_pair(files: TlsFiles) -> None:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_identity(context, files)


class NodeTls:
    """Everything TLS for one node, from its config."""

    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        c = config
        try:
            self.files = TlsFiles(
                c["ssl.ca.location"], c["ssl.certificate.location"], c["ssl.key.location"], c["ssl.key.password"]
            )
        except TlsFileError as e:
            raise ConfigError(str(e)) from None
        secure = [n for n in c.all_listener_names() if c.listener_protocol(n) in TLS_PROTOCOLS]
        self.servers = {n: ServerTls(self.files, c.client_auth(n)) for n in secure}
        """The server side of each TLS listener, by name; empty when no listener is SSL or SASL_SSL."""

    def check(self) -> None:
        """Read every file now, so that a missing or bad one stops the node at start with its name."""
        server = next(iter(self.servers.values()), None)  # the files are the same for every listener
        try:
            if server is not None:
                server._grpc_configuration()
                server.current()
            self.files.root_pem()
        except TlsFileError as e:
            raise ConfigError(f"TLS: {e}") from None

    def server_credentials(self, listener_name: str) -> grpc.ServerCredentials | None:
        """gRPC server credentials for listener ``listener_name``; None: plaintext."""
        server = self.servers.get(listener_name.upper())
        return None if server is None else server.grpc_credentials()

    def kafka_context(self, listener_name: str) -> Callable[[], ssl.SSLContext] | None:
        """What the Kafka listener asks for each new connection's context; None: plaintext."""
        server = self.servers.get(listener_name.upper())
        return None if server is None else server.current

    def client_files(self, protocol: str) -> TlsFiles | None:
        """How this node connects to a listener of ``protocol``: TLS with its own certificate, or plaintext."""
        return self.files if protocol in TLS_PROTOCOLS else None

    def channel_security(self) -> Callable[[str], TlsFiles | None]:
        """Per address: the controllers' (controller.quorum.voters) are reached with the controller listener's
        protocol, any other node (a broker's gRPC listener) with the inter-broker one."""
        voters = {f"{v.host}:{v.port}" for v in self.config.voters}
        controller = self.client_files(self.config.controller_protocol)
        broker = self.client_files(self.config.inter_broker_protocol)
        return lambda address: controller if address in voters else broker

    def kafka_client_context(self) -> ssl.SSLContext | None:
        """For a follower fetching over a leader's Kafka listener (replica.fetch.protocol=kafka); None: plaintext.
        Made per connection, so a renewed node certificate is presented on the next one."""
        protocol = self.config.kafka_protocol
        files = self.client_files(protocol) if protocol is not None else None
        return files.client_context() if files is not None else None
