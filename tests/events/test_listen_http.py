"""`imgwarm listen --http`: MinIO's webhook target POSTs, each with its bearer token; and how
listen refuses what it cannot run with."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from tests.support.listening import Listening, minio_access, photo, wait_made
from tests.support.queues import Queue
from tests.support.servers import free_port, wait_for


def _post(port: int, body: bytes, token: str | None) -> int:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", data=body, headers=headers,
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def _raw(port: int, header: str) -> int:
    """The status of a POST with the right token and one header of the test's own."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(f"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-token"
                           f"\r\n{header}\r\n\r\n".encode())
        return int(connection.recv(100).split()[1])


def _up(port: int) -> bool:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=2) as answer:
            return answer.status == 200  # MinIO checks a webhook target with a HEAD
    except OSError:
        return False


def test_webhook_posts_need_the_token(events_queue: Queue) -> None:
    queue, port = events_queue, free_port()
    listening = Listening(queue, "--http", f"127.0.0.1:{port}",
                          IMGWARM_LISTEN_TOKEN="s3cret-token", IMGWARM_EVENT_MAX_BYTES="4096")
    wait_for(lambda: _up(port), "listen to answer a HEAD")
    key = "http/ünï photo.jpg"
    queue.put(key, photo(500))
    record = json.loads(minio_access("created", queue.bucket, key, "10"))[0]["Event"][0]
    # what MinIO's webhook target sends
    body = json.dumps({"EventName": "s3:ObjectCreated:Put", "Key": f"{queue.bucket}/{key}",
                       "Records": [record]}).encode()
    assert _post(port, body, None) == 401
    assert _post(port, body, "wrong") == 401
    assert _post(port, b"x" * 5000, "s3cret-token") == 413
    assert _post(port, b"{not json", "s3cret-token") == 400
    for length in ("\u00b2", "9" * 5000, "-1"):  # a digit to str.isdigit only; huge; negative
        assert _raw(port, f"Content-Length: {length}") == 411
    assert _raw(port, "Transfer-Encoding: chunked") == 411
    assert _post(port, body, "s3cret-token") == 200
    wait_made(queue, [key])
    assert _post(port, body, "s3cret-token") == 200  # again: a duplicate, still 200
    summary = listening.stop()
    assert summary["queued"] == 1
    assert summary["duplicates"] == 1
    assert summary["malformed"] == 2


def test_listen_refuses_what_it_cannot_run(events_queue: Queue) -> None:
    queue = events_queue
    none = queue.cli("listen")
    assert none.returncode == 2 and "give a source" in none.stderr
    tokenless = queue.cli("listen", "--http", f"127.0.0.1:{free_port()}")
    assert tokenless.returncode == 2 and "listen_token" in tokenless.stderr
    away = queue.cli("listen", "--sqs", f"http://127.0.0.1:{free_port()}/123456789012/q",
                     timeout=120)
    assert away.returncode == 1
    assert len(away.stderr.strip().splitlines()) == 1, away.stderr
    assert "cannot reach the queue" in away.stderr
