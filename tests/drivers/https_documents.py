"""A local HTTPS server for Client ID Metadata Documents (tests/agents, tests/browser): a fresh
self-signed certificate for 127.0.0.1 and the name NAME (the settings are pointed at it as the CA
to trust), and documents served at paths the test sets; every request is counted. A dripping path
(`drip`) sends its whole answer, status line included, one byte at a time, as a client id
document that means to hold Vouch's worker would; `on_request` runs in the server's thread while
a request is being answered (a test looks at the database from there)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# A name the certificate also holds: a test that resolves it to 127.0.0.1 (its own resolver)
# shows the fetch verifies the certificate against the URL's name, not the address.
NAME = "documents.vouch.test"


def _certificate(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName(NAME)]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class DocumentServer:
    def __init__(self, folder: Path) -> None:
        self.cert, key = _certificate(folder)
        self.documents: dict[str, tuple[int, bytes]] = {}
        self.hits: dict[str, int] = {}
        self.drips: dict[str, tuple[bytes, float]] = {}
        self.on_request: Callable[[], None] | None = None
        self.stopped = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.hits[self.path] = server.hits.get(self.path, 0) + 1
                if server.on_request is not None:
                    server.on_request()
                if self.path in server.drips:
                    self._drip(*server.drips[self.path])
                    return
                status, body = server.documents.get(self.path, (404, b"{}"))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _drip(self, answer: bytes, interval: float) -> None:
                self.close_connection = True
                try:
                    for byte in answer:
                        if server.stopped.wait(interval):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                except OSError:  # the client gave up: what a deadline is for
                    return

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.base = f"https://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return self.base + path

    def serve(self, path: str, document: Any, status: int = 200) -> str:
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        self.documents[path] = (status, body)
        return self.url(path)

    def drip(self, path: str, document: Any, interval: float = 0.5) -> str:
        """Serve `document` at `path` one byte every `interval` seconds, the status line and
        headers included (each byte well within any per-read timeout)."""
        body = json.dumps(document).encode()
        answer = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        self.drips[path] = (answer, interval)
        return self.url(path)

    def stop(self) -> None:
        self.stopped.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def document_server(tmp_path: Path, settings: Any) -> Iterator[DocumentServer]:
    server = DocumentServer(tmp_path)
    settings.MCP_CLIENT_DOCUMENT_CA = str(server.cert)
    try:
        yield server
    finally:
        server.stop()
