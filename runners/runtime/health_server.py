"""`manage.py runtime --health-port N`: the runtime worker's `GET /healthz`, for a process
manager that restarts what is unhealthy.

The worker serves no other HTTP, so this is a few lines over asyncio's streams rather than a
web server: 200 when its database, its Channels layer and its runtime link are all up and it
takes runs from the queue, else 503 naming what is not; the runtime link's own state (`mode`,
`state`, `state_reason`) and how many runs this worker served and is streaming come with it
either way.
"""

import asyncio
import json

from langhost import health
from runners.runtime.worker import RuntimeWorkerConsumer

REQUEST_LIMIT_BYTES = 8192


async def start(gateway, port: int, host: str = "127.0.0.1") -> asyncio.Server:
    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), health.CHECK_SECONDS)
            method, path = head[:REQUEST_LIMIT_BYTES].decode("latin-1").split(" ", 2)[:2]
            if (method, path.split("?")[0]) == ("GET", "/healthz"):
                body, status = await _health(gateway)
            else:
                body, status = {"detail": f"No endpoint matches {method} {path}."}, 404
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ValueError):
            body, status = {"detail": "Bad request."}, 400
        data = json.dumps(body).encode()
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}.get(status,
                                                                       "Service Unavailable")
        writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode() + data)
        try:
            await writer.drain()
        finally:
            writer.close()

    return await asyncio.start_server(respond, host, port, limit=REQUEST_LIMIT_BYTES)


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
