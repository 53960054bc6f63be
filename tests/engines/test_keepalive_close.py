"""A server that closes each kept-alive connection a moment after its reply (without
``Connection: close``): the client's next request on that connection races the close.

The tiny server here (raw sockets, standard library only; not a model) answers one request
per connection with a fixed chat-completions body, then waits `CLOSE_AFTER` and closes the
socket: a request sent on it in that moment is never read (the server's kernel answers it
with a reset). Such a request is sent again once on a fresh connection and is not a failed
call, on both HTTP drivers; a request the server read and then hung up on without a reply
stays a failed call.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest

from binaryeval_dspy.engines.http_client import AsyncConnections, Connections, HttpTarget, apost_json, post_json

CLOSE_AFTER = 0.03  # seconds between a reply and the close: the client's next request comes sooner
REPLY = json.dumps({"id": "x", "object": "chat.completion", "model": "m",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "{}"},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()


class ClosingServer:
    """Answers the first request of each connection, then closes it `CLOSE_AFTER` seconds later
    (``hang_up``: reads the request and closes without a reply). ``received`` counts the
    requests it read in full."""

    def __init__(self, *, hang_up: bool = False, hang_up_second: bool = False) -> None:
        self.hang_up = hang_up
        self.hang_up_second = hang_up_second  # answer a connection's first request, keep it open, hang up on the next
        self.received = 0
        self.lock = threading.Lock()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _accept(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            if not self._read_request(conn):
                return
            if not self.hang_up:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(REPLY), REPLY))
            if self.hang_up_second:
                self._read_request(conn)  # read in full, then closed without a reply
                return
            time.sleep(CLOSE_AFTER)  # a request sent meanwhile sits unread: the close resets it

    def _read_request(self, conn: socket.socket) -> bool:
        """Read one request in full and count it; False when the client closed first."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length"))
        while len(body) < length:
            body += conn.recv(65536)
        with self.lock:
            self.received += 1
        return True

    def close(self) -> None:
        self.stopped = True
        self.sock.close()


@pytest.fixture
def closing_server():
    server = ClosingServer()
    yield server
    server.close()


def post_many(route: str, base_url: str, n: int, **target) -> list:
    target = HttpTarget(base_url=base_url, timeout=5, backoff=0.0, **target)
    if route == "sync":
        connections = Connections(target)
        try:
            return [post_json(connections, {"n": i}) for i in range(n)]
        finally:
            connections.close()

    async def run() -> list:
        connections = AsyncConnections(target, 1)
        try:
            return [await apost_json(connections, {"n": i}) for i in range(n)]
        finally:
            await connections.close()

    return asyncio.run(run())


@pytest.mark.parametrize("route", ["sync", "async"])
def test_a_request_that_races_the_servers_close_is_sent_again_and_not_counted_as_failed(closing_server, route):
    posts = post_many(route, closing_server.base_url, 12)
    assert [p.error for p in posts] == [None] * 12
    assert sum(p.failed_attempts for p in posts) == 0
    assert sum(p.attempts for p in posts) == closing_server.received == 12


@pytest.mark.parametrize("route", ["sync", "async"])
def test_a_server_that_read_the_request_and_hung_up_is_still_a_failed_call(route):
    server = ClosingServer(hang_up=True)
    try:
        posts = post_many(route, server.base_url, 3, max_retries=1)
    finally:
        server.close()
    assert all(p.error_type == "ConnectionError" for p in posts)
    assert sum(p.failed_attempts for p in posts) == server.received == 6


@pytest.mark.parametrize("route", ["sync", "async"])
def test_a_hang_up_after_reading_a_request_on_a_reused_connection_is_a_failed_call_not_a_resend(route):
    """http.client reports this clean close as RemoteDisconnected, a ConnectionResetError: it
    must not pass for the reset of a connection closed before the request was read."""
    server = ClosingServer(hang_up_second=True)
    try:
        posts = post_many(route, server.base_url, 2, max_retries=0)
    finally:
        server.close()
    assert posts[0].error is None and posts[1].error_type == "ConnectionError"
    assert sum(p.attempts for p in posts) == server.received == 2
    assert sum(p.failed_attempts for p in posts) == 1
