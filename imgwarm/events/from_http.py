"""``listen --http HOST:PORT``: bucket notifications POSTed by MinIO's webhook target (or any
sender of the S3 shapes), each checked for ``Authorization: Bearer TOKEN`` against
``listen_token``.

Answers: 200 once the jobs are queued, 401 without the right token, 411 without a length,
413 over ``event_max_bytes`` (the body is not read), 400 for a malformed body, 503 when the
jobs could not be queued (the sender tries again). A HEAD or GET answers 200 with nothing:
MinIO checks that a webhook target is up with a HEAD (older releases) or a bare connection.
The standard library's threaded server: a thread per connection, each socket timed out.
"""

from __future__ import annotations

import hmac
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from imgwarm.config import Settings
from imgwarm.events.listen import Listener
from imgwarm.exceptions import SettingsError
from imgwarm.text import printable

SOCKET_TIMEOUT = 10.0  # seconds a sender may take to send its request
BODY_DEADLINE = 30.0  # seconds its whole body may take


def address_of(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SettingsError(f"--http {printable(text)!r}: give HOST:PORT (127.0.0.1:9009, "
                            "0.0.0.0:9009)")
    return host.strip("[]"), int(port)


class _Server(ThreadingHTTPServer):
    # a stop does not wait for a client that trickles: a request cut short was not answered,
    # so its sender sends it again (a job queued twice is harmless)
    daemon_threads = True
    listener: Listener
    token: bytes
    limit: int


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = SOCKET_TIMEOUT
    server_version = "imgwarm-listen"
    sys_version = ""

    def log_message(self, format: str, *args: object) -> None:
        pass  # the listener prints one line per event instead

    def _answer(self, status: int, text: str = "") -> None:
        body = (text + "\n").encode() if text else b""
        self.send_response(status)
        if status == 401:
            self.send_header("WWW-Authenticate", 'Bearer realm="imgwarm"')
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:
        self._answer(200)

    def do_GET(self) -> None:
        self._answer(200, "imgwarm listen: POST bucket notifications here")

    def do_POST(self) -> None:
        given = self.headers.get("Authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
                token.strip().encode("utf-8", "surrogateescape"), self.server.token):
            self.close_connection = True
            self._answer(401, "a bearer token is needed (Authorization: Bearer TOKEN)")
            return
        length = self.headers.get("Content-Length", "")
        if self.headers.get("Transfer-Encoding") or not (
                length.isascii() and length.isdigit() and len(length) <= 15):
            self.close_connection = True
            self._answer(411, "Content-Length is needed (and no Transfer-Encoding)")
            return
        if int(length) > self.server.limit:
            self.close_connection = True  # the body is not read
            self.server.listener.counters.add("received")
            self.server.listener.counters.add("malformed")
            self.server.listener.say("malformed", f"{length} bytes, over event_max_bytes "
                                     f"({self.server.limit})", "http", about="error")
            self._answer(413, f"over {self.server.limit} bytes")
            return
        body = self._body(int(length))
        if body is None:
            self.close_connection = True
            self._answer(408, f"the body did not come within {BODY_DEADLINE:g} s")
            return
        found = self.server.listener.handle(body, "http")
        if found == "malformed":
            self._answer(400, "not a bucket notification")
        elif found == "failed":
            self._answer(503, "the jobs could not be queued: send it again")
        else:
            self._answer(200, "ok")


    def _body(self, length: int) -> bytes | None:
        """The body, read within BODY_DEADLINE whatever its pace; None when it did not come
        (a client that sends a byte now and then holds a thread no longer than that)."""
        deadline, parts, left = time.monotonic() + BODY_DEADLINE, [], length
        try:
            while left > 0:
                if time.monotonic() > deadline:
                    return None
                part = self.rfile.read1(min(left, 1 << 16))
                if not part:
                    return None
                parts.append(part)
                left -= len(part)
        except OSError:  # (a socket timeout: SOCKET_TIMEOUT without a byte)
            return None
        return b"".join(parts)


class HttpSource:
    """The webhook endpoint."""

    def __init__(self, address: str, settings: Settings) -> None:
        self.address = address_of(address)
        self.name = "http"
        token = settings.events.listen_token
        if not token:
            raise SettingsError("--http needs a token: set listen_token "
                                "(IMGWARM_LISTEN_TOKEN), which senders give as "
                                "Authorization: Bearer TOKEN")
        self.token = token.encode("utf-8", "surrogateescape")
        self.limit = settings.events.event_max_bytes
        self.server: _Server | None = None

    def check(self) -> None:
        try:
            self.server = _Server(self.address, _Handler)
        except OSError as error:
            raise SettingsError(f"--http {self.address[0]}:{self.address[1]}: cannot listen "
                                f"there: {error.strerror}") from None
        self.server.token = self.token
        self.server.limit = self.limit

    def run(self, listener: Listener, stop: threading.Event) -> None:
        assert self.server is not None, "check() first"
        server = self.server
        server.listener = listener

        def stopper() -> None:
            stop.wait()
            server.shutdown()

        threading.Thread(target=stopper, name="http-stop", daemon=True).start()
        try:
            server.serve_forever(poll_interval=0.5)
        finally:
            server.server_close()  # waits for the requests in hand
