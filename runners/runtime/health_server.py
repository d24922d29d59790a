"""`manage.py runtime --health-port N`: the runtime worker's `GET /healthz`, for a process
manager that restarts what is unhealthy, and its `GET /metrics` for Prometheus (with
`LANGHOST_METRICS_TOKEN` set, for its bearer only; the port listens on loopback).

The worker serves no other HTTP, so this is a few lines over asyncio's streams rather than a
web server: 200 when its database, its Channels layer and its runtime link are all up and it
takes runs from the queue, else 503 naming what is not; the runtime link's own state (`mode`,
`state`, `state_reason`) and how many runs this worker served and is streaming come with it
either way.
"""

import asyncio
import ipaddress
import json

from asgiref.sync import sync_to_async

from langhost.base import health
from runners.observability import metrics
from runners.runtime.worker import RuntimeWorkerConsumer

REQUEST_LIMIT_BYTES = 8192


REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found"}


async def start(gateway, port: int, host: str = "127.0.0.1") -> asyncio.Server:
    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        content_type = "application/json"
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), health.CHECK_SECONDS)
            text = head[:REQUEST_LIMIT_BYTES].decode("latin-1")
            method, path = text.split(" ", 2)[:2]
            if (method, path.split("?")[0]) == ("GET", "/healthz"):
                body, status = await _health(gateway)
            elif (method, path.split("?")[0]) == ("GET", "/metrics"):
                body, status, content_type = await _metrics(gateway, text, writer)
            else:
                body, status = {"detail": f"No endpoint matches {method} {path}."}, 404
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ValueError):
            body, status = {"detail": "Bad request."}, 400
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        writer.write(f"HTTP/1.1 {status} {REASONS.get(status, 'Service Unavailable')}\r\n"
                     f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
                     "Connection: close\r\n\r\n".encode() + data)
        try:
            await writer.drain()
        finally:
            writer.close()

    return await asyncio.start_server(respond, host, port, limit=REQUEST_LIMIT_BYTES)


async def _metrics(gateway, head: str, writer: asyncio.StreamWriter):
    """The metrics as `(body, status, content type)`, or a 403 for a caller who may not."""
    headers = dict(line.split(":", 1) for line in head.split("\r\n")[1:] if ":" in line)
    given = {name.strip().lower(): value.strip() for name, value in headers.items()}
    peer = (writer.get_extra_info("peername") or ("",))[0]
    try:
        local = ipaddress.ip_address(peer).is_loopback
    except ValueError:
        local = False
    if not metrics.may_read(given.get("authorization", ""), local=local):
        return ({"detail": "Metrics need the bearer token set in LANGHOST_METRICS_TOKEN."}, 403,
                "application/json")
    active, runners = await sync_to_async(metrics.read_ledger)()
    metrics.refresh(active, await gateway.status(), runners)
    return metrics.exposition(), 200, metrics.CONTENT_TYPE


async def _health(gateway) -> tuple[dict, int]:
    link = await gateway.status()
    states = await health.parts()
    states["runtime"] = "ok" if link.get("state") == "ready" else \
        f"down: {link.get('state')} ({link.get('state_reason') or 'no reason given'})"
    # Until its first discovery is done the worker takes no runs from the queue.
    states["queue"] = "ok" if RuntimeWorkerConsumer.own_channel else "down: not serving yet"
    body, status = health.answer(states)
    body["runtime_link"] = {key: link.get(key) for key in ("mode", "state", "state_reason",
                                                           "connected_since")}
    body["runs"] = {"served": RuntimeWorkerConsumer.runs_served,
                    "streaming": len(RuntimeWorkerConsumer.streams)}
    return body, status
