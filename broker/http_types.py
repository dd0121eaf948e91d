"""What the brokers' HTTP listeners (broker/http_server.py) hand their handlers and take back, without I/O: a
request read whole, a reply, and a refusal in Confluent's error shape ``{"error_code", "message"}``, which the
schema registry and the HTTP API both answer with."""

from __future__ import annotations

import json
from dataclasses import dataclass

JSON = "application/json"

Headers = tuple[tuple[str, str], ...]


class HttpError(Exception):
    """A request refused in Confluent's error shape: ``status`` is the HTTP status, ``code`` the ``error_code``."""

    def __init__(self, status: int, code: int, message: str, headers: Headers = ()) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers

    def body(self) -> dict[str, object]:
        return {"error_code": self.code, "message": self.message}


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    target: str  # the request target as sent: path and query
    headers: tuple[tuple[bytes, bytes], ...]  # names in lower case, as h11 gives them
    body: bytes
    peer_host: str = ""  # the client's address
    peer_port: int = 0
    peer_certificate: bytes = b""  # on a TLS listener, the client certificate it verified (DER); b"" without one

    def header(self, name: bytes) -> str | None:
        """The value of header ``name`` (lower case), the last one if sent twice; None without one."""
        found = [v for k, v in self.headers if k == name]
        return found[-1].decode("latin-1") if found else None


@dataclass(frozen=True, slots=True)
class HttpReply:
    status: int
    content_type: str
    body: bytes
    headers: Headers = ()  # besides content-type and content-length

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name), None)


def json_reply(status: int, body: object, content_type: str = JSON, headers: Headers = ()) -> HttpReply:
    return HttpReply(status, content_type, json.dumps(body).encode(), headers)


def error_reply(e: HttpError, content_type: str = JSON) -> HttpReply:
    return json_reply(e.status, e.body(), content_type, e.headers)
