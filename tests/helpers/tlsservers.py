"""Real TLS on 127.0.0.1 for the transport-failure tests: a private certificate authority made in the test (trustme),
the certificates it issues (expired ones, ones for another name), and an HTTPS server answering every request.

`Authority()` holds a fresh CA; `authority.bundle(dir)` writes its certificate as a PEM file (what CA_BUNDLE
names), `authority.hashed_dir(dir)` as a directory `openssl rehash` would make (what SSL_CERT_DIR names).
`TlsServer(authority.leaf(...))` serves HTTPS with that certificate and answers each request 200 with a small
JSON body; with `authority=` the CA's own certificate goes in the chain too.
"""

from __future__ import annotations

import ssl
import subprocess
import tempfile
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import trustme

BODY = b'{"ok": true}'


class Authority:
    def __init__(self) -> None:
        self.ca = trustme.CA()

    def bundle(self, directory: Path, name: str = "private-ca.pem") -> Path:
        path = directory / name
        self.ca.cert_pem.write_to_path(str(path))
        return path

    def hashed_dir(self, directory: Path) -> Path:
        """A directory holding the CA's certificate under its subject hash (`<hash>.0`), as OpenSSL looks it up."""
        pem = self.bundle(directory, "ca.pem")
        subject = subprocess.run(
            ["openssl", "x509", "-hash", "-noout", "-in", str(pem)], check=True, capture_output=True, text=True
        ).stdout.strip()
        hashed = directory / "hashed"
        hashed.mkdir()
        (hashed / f"{subject}.0").write_bytes(pem.read_bytes())
        return hashed

    def leaf(self, *names: str, expired: bool = False) -> trustme.LeafCert:
        """A server certificate for `names` (default: 127.0.0.1 and localhost); `expired`: valid until yesterday."""
        when = {}
        if expired:
            now = datetime.now(UTC)
            when = {"not_before": now - timedelta(days=30), "not_after": now - timedelta(days=1)}
        return self.ca.issue_cert(*(names or ("127.0.0.1", "localhost")), **when)


class TlsServer:
    """HTTPS on 127.0.0.1 with `leaf` (a trustme certificate), or with a (certificate, key) pair of files; every
    GET or POST is answered 200 with BODY and counted in `answered`."""

    def __init__(
        self,
        leaf: trustme.LeafCert | None = None,
        files: tuple[Path, Path] | None = None,
        authority: Authority | None = None,
        host: str = "127.0.0.1",
    ):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if leaf is not None and authority is not None:  # the root sent too: "self-signed certificate in ... chain"
            with tempfile.TemporaryDirectory() as directory:
                chain = Path(directory) / "chain.pem"
                chain.write_bytes(leaf.private_key_and_cert_chain_pem.bytes() + authority.ca.cert_pem.bytes())
                context.load_cert_chain(chain)
        elif leaf is not None:
            leaf.configure_cert(context)
        elif files is not None:
            context.load_cert_chain(*files)
        self.answered = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.url = f"https://{host}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> TlsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.answered += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(BODY)))
                self.end_headers()
                self.wfile.write(BODY)

            do_GET = do_POST = _answer

            def log_message(self, *args) -> None:
                pass

        return Handler
