"""A client that leaves while LangHost's ASGI handler runs its request: the run is cancelled and
nothing is sent to it."""

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync

from accounts.tokens import access_token_for
from langhost.handlers import ASGIHandler
from ledger.models import AgentRun
from runners.tests.conversation_fixtures import register_builtin, reply_results  # noqa: F401
from tests.timing import scaled


def post_scope(path: str, token: str, body: bytes) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "POST", "scheme": "http", "path": path, "raw_path": path.encode(),
            "query_string": b"", "root_path": "",
            "headers": [(b"host", b"localhost"), (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"authorization", f"Bearer {token}".encode())],
            "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}


# Transactional: the handler tidies the database connections between requests, as in serving.
@pytest.mark.django_db(transaction=True)
def test_a_client_that_leaves_a_run_cancels_it(builtin, superuser):
    started = asyncio.Event()

    async def slow(context):
        started.set()
        await asyncio.sleep(30)
        yield reply_results(context, "too late")[0]

    runner_id = builtin("builtin:left-behind", slow)
    body = json.dumps({"runner_id": runner_id, "input": {"text": "x"}}).encode()

    async def leave_during_the_run():
        arriving = asyncio.Queue()
        arriving.put_nowait({"type": "http.request", "body": body, "more_body": False})
        sent = []

        async def send(message):
            sent.append(message)

        serving = asyncio.create_task(ASGIHandler()(
            post_scope("/api/v1/runs", access_token_for(superuser), body), arriving.get, send))
        await asyncio.wait_for(started.wait(), scaled(10))
        arriving.put_nowait({"type": "http.disconnect"})
        await asyncio.wait_for(serving, scaled(10))
        return sent

    sent = async_to_sync(leave_during_the_run)()

    assert sent == []
    run = AgentRun.objects.get()
    assert (run.status, run.status_reason) == ("cancelled", "consumer_cancelled")
