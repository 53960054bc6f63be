"""The benchmarks' asyncio scripted endpoint (benchmarks/scripted_server.py) answers as `TimedEndpoint` does.

The Ray benchmark's "0 differences from the live engine" and its per-request CPU figures rest on
this server giving exactly the replies of tests/fake_endpoint.py with `scripted_verdict`: the same
verdict per item and question, the same usage, the same logprobs, over kept-alive connections.
"""

from __future__ import annotations

import http.client
import json
import socket
from urllib.parse import urlsplit

import pytest

from benchmarks.engines import scripted_verdict
from benchmarks.scripted_server import ScriptedServer, token_count
from tests.fake_endpoint import FakeEndpoint, tokenize


def _body(output: str, question: str, **extra) -> dict:
    user = (f"[[ ## input ## ]]\nThe article.\n\n[[ ## output ## ]]\n{output}\n\n[[ ## question ## ]]\n{question}"
            "\n\nRespond with a JSON object in the following order of fields: `verdict`, then `explanation`.")
    return {"model": "fake-x", "messages": [{"role": "system", "content": "You are a judge. "},
                                            {"role": "user", "content": user}], **extra}


BODIES = [_body(f"Summary number {i}.", f"Does the summary meet requirement {q}?", **extra)
          for i in range(6) for q in range(1, 5)
          for extra in ({}, {"logprobs": True, "top_logprobs": 2}, {"max_tokens": 3})]


def _post_all(base_url: str, bodies: list[dict]) -> list[dict]:
    """POST every body on ONE kept-alive connection; the replies without their id and time."""
    url = urlsplit(base_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    replies = []
    for body in bodies:
        connection.request("POST", url.path + "/chat/completions", json.dumps(body),
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200
        reply = json.loads(response.read())
        reply.pop("id"), reply.pop("created")
        replies.append(reply)
    connection.close()
    return replies


@pytest.mark.parametrize("text", ["", " ", "one", " lead and trail  ", "a\n\nb\tc\n", "x  "])
def test_token_count_is_tokenize_without_the_regex(text):
    assert token_count(text) == len(tokenize(text))


def test_replies_are_the_threaded_endpoints_replies():
    with FakeEndpoint(reply=scripted_verdict) as threaded:
        expected = _post_all(threaded.base_url, BODIES)
    with ScriptedServer() as server:
        mark = server.mark()
        got = _post_all(server.base_url, BODIES)
        assert server.count(mark) == len(BODIES)
        replies, first, last = server.window(mark)
        assert replies == len(BODIES) and last >= first
    assert got == expected
    verdicts = {json.loads(r["choices"][0]["message"]["content"])["verdict"] for r in got
                if r["choices"][0]["finish_reason"] == "stop"}
    assert verdicts == {"yes", "no"}  # the replies depend on the item and question


def test_a_request_split_across_packets_and_two_in_one_packet():
    body = json.dumps(BODIES[0]).encode()
    request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
    with ScriptedServer() as server:
        url = urlsplit(server.base_url)
        with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
            sock.sendall(request[:20])
            sock.sendall(request[20:-5])
            sock.sendall(request[-5:] + request)  # the first one's end, then a whole second one
            data = b""
            while data.count(b"HTTP/1.1 200") < 2 or not data.endswith(b"}"):
                chunk = sock.recv(65536)
                assert chunk, f"connection closed after {data[:300]!r}"
                data += chunk
        assert server.count((0, 0)) == 2
