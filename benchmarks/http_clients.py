"""CPU per request of HTTP clients posting chat-completions bodies, on one scripted endpoint.

Why the engines' HTTP client (`binaryeval_dspy.engines.http_client`) is the standard
library's ``http.client``: a large run waits for the client's CPU, not the endpoint. Each
client posts the same body N times with C in flight (threads for the synchronous clients,
one event loop for the async ones) to the scripted endpoint of ``tests/fake_endpoint.py``
(0 s latency), and the script prints CPU-ms per request and the ratio to ``http.client``,
with the load average (a shared 2-core machine is noisy: compare ratios from one run).

    python benchmarks/http_clients.py [--requests 3000] [--in-flight 64]

Measured here (load 5-7): http.client 0.22 CPU-ms per request, aiohttp 0.27, httpx 2.12,
httpx async 4.44. aiohttp is skipped when it is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import resource
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripted endpoint lives in tests/
from tests.fake_endpoint import fake_endpoint_running  # noqa: E402

BODY = json.dumps({"model": "fake", "messages": [{"role": "user", "content": "The match ended two to one. " * 20
                                                   + "[[ ## question ## ]]\nIs it short?"}],
                   "response_format": {"type": "json_object"}}).encode()


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def on_threads(make_send, n: int, in_flight: int) -> float:
    """CPU-ms per request of `in_flight` threads each sending n / in_flight requests."""
    per = n // in_flight

    def worker() -> None:
        send = make_send()
        for _ in range(per):
            send()

    threads = [threading.Thread(target=worker) for _ in range(in_flight)]
    start = cpu_seconds()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return (cpu_seconds() - start) * 1000 / (per * in_flight)


def stdlib_client(base: str):
    parts = urlsplit(base)

    def make():
        connection = http.client.HTTPConnection(parts.hostname, parts.port)

        def send() -> None:
            connection.request("POST", parts.path + "/chat/completions", BODY, {"Content-Type": "application/json"})
            json.loads(connection.getresponse().read())
        return send
    return make


def httpx_client(base: str, in_flight: int):
    client = httpx.Client(limits=httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight))

    def make():
        def send() -> None:
            json.loads(client.post(base + "/chat/completions", content=BODY,
                                   headers={"Content-Type": "application/json"}).content)
        return send
    return make


async def httpx_async(base: str, n: int, in_flight: int) -> float:
    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
    async with httpx.AsyncClient(limits=limits) as client:
        gate = asyncio.Semaphore(in_flight)

        async def one() -> None:
            async with gate:
                reply = await client.post(base + "/chat/completions", content=BODY,
                                          headers={"Content-Type": "application/json"})
                json.loads(reply.content)
        start = cpu_seconds()
        await asyncio.gather(*(one() for _ in range(n)))
        return (cpu_seconds() - start) * 1000 / n


async def aiohttp_client(base: str, n: int, in_flight: int) -> float:
    import aiohttp

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=in_flight)) as session:
        gate = asyncio.Semaphore(in_flight)

        async def one() -> None:
            async with gate, session.post(base + "/chat/completions", data=BODY,
                                          headers={"Content-Type": "application/json"}) as reply:
                json.loads(await reply.read())
        start = cpu_seconds()
        await asyncio.gather(*(one() for _ in range(n)))
        return (cpu_seconds() - start) * 1000 / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--in-flight", type=int, default=64)
    args = parser.parse_args()
    n, c = args.requests, args.in_flight
    print(f"load average {os.getloadavg()[0]:.1f}; endpoint: tests/fake_endpoint.py (scripted, 0 s latency); "
          f"{n} requests, {c} in flight")
    with fake_endpoint_running() as endpoint:
        base = endpoint.base_url
        figures = {"http.client": on_threads(stdlib_client(base), n, c),
                   "httpx": on_threads(httpx_client(base, c), n, c),
                   "httpx async": asyncio.run(httpx_async(base, n, c))}
        try:
            figures["aiohttp"] = asyncio.run(aiohttp_client(base, n, c))
        except ImportError:
            pass
    for name, ms in figures.items():
        print(f"{name:12s} {ms:6.2f} CPU-ms per request  ({ms / figures['http.client']:.1f}x http.client)")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
