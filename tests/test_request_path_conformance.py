"""LangHost's request path answers as Django's and DRF's own would.

The same requests go through LangHost's ASGI handler (its middleware, async DRF dispatch,
content negotiation and request serializers) and through Django's stock `ASGIHandler` with
Django's stock middleware and DRF's stock views (`tests/stock_urls.py`); status, headers and
body must match. What varies by nature is normalised first: ids, times, CSRF tokens. A Django
or DRF upgrade that changes what the stock stack answers shows here as the case that differs.
"""

import asyncio
import json
import re
from dataclasses import dataclass

import pytest
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler as StockASGIHandler
from django.test import override_settings
from rest_framework import serializers

from accounts.tokens import token_pair
from langhost.base.serializers import RequestSerializer
from langhost.handlers import ASGIHandler
from ledger.models import AgentRun
from ledger.services import conversations
from runners.tests.conversation_fixtures import register_builtin  # noqa: F401
from tests.stock_urls import STOCK_MIDDLEWARE
from tests.timing import scaled

pytestmark = pytest.mark.django_db(transaction=True)

VARYING = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"), "<time>"),
    (re.compile(r"evt-[A-Za-z0-9_-]+"), "<event id>"),
    (re.compile(r"csrftoken=[A-Za-z0-9]+"), "csrftoken=<token>"),
    (re.compile(r"\b[A-Za-z0-9]{64}\b"), "<masked csrf token>"),
    (re.compile(r"expires=[^;]+"), "expires=<time>"),
]


@dataclass
class Answer:
    status: int | None
    headers: list[tuple[str, str]]
    body: str

    def normalised(self) -> tuple:
        def plain(text: str) -> str:
            for pattern, stands_for in VARYING:
                text = pattern.sub(stands_for, text)
            return text

        headers = [(name, plain(value)) for name, value in self.headers
                   if name not in ("date", "content-length")]
        return self.status, sorted(headers), plain(self.body)


async def exchange(app, method: str, path: str, *, headers: dict, body: bytes = b"",
                   leave_after: float | None = None) -> Answer:
    """One request through `app` as a server would send it; with `leave_after`, the client
    goes away that many seconds after sending it."""
    path, _, query = path.partition("?")
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": query.encode(), "client": ("127.0.0.1", 40000),
        "server": ("localhost", 8000),
        "headers": [(b"host", b"localhost"), (b"content-length", str(len(body)).encode()),
                    *((name.lower().encode(), value.encode()) for name, value in headers.items())],
    }
    answered = asyncio.Event()
    requested = False
    start: dict = {}
    chunks: list[bytes] = []

    async def receive():
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": body, "more_body": False}
        if leave_after is not None:
            await asyncio.sleep(leave_after)
        else:
            await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                answered.set()

    await asyncio.wait_for(app(scope, receive, send), scaled(30))
    raw = b"".join(chunks)
    headers_sent = [(name.decode().lower(), value.decode())
                    for name, value in start.get("headers", [])]
    length = dict(headers_sent).get("content-length")
    assert length is None or int(length) == len(raw), "Content-Length is the body's length"
    return Answer(start.get("status"), headers_sent, raw.decode())


def stock_stack():
    """Django's stock middleware and DRF's stock views, while the block runs."""
    return override_settings(MIDDLEWARE=STOCK_MIDDLEWARE, ROOT_URLCONF="tests.stock_urls")


async def both(monkeypatch, method, path, **kwargs) -> tuple[Answer, Answer]:
    """The request through LangHost's stack, then through the stock one. `path` may be a
    callable making the path (and what it names) afresh for each."""
    def path_now():
        return path() if callable(path) else path

    ours = await exchange(ASGIHandler(), method, await sync_to_async(path_now)(), **kwargs)
    with stock_stack(), monkeypatch.context() as patch:
        patch.setattr(RequestSerializer, "get_fields", serializers.Serializer.get_fields)
        stock = await exchange(StockASGIHandler(), method, await sync_to_async(path_now)(),
                               **kwargs)
    return ours, stock


@pytest.fixture
def bearer(superuser, user):
    tokens = {"superuser": token_pair(superuser)["access_token"],
              "user": token_pair(user)["access_token"]}

    def headers(who: str | None = "superuser", **more) -> dict:
        if who == "bad":
            more["Authorization"] = "Bearer not-a-token"
        elif who is not None:
            more["Authorization"] = f"Bearer {tokens[who]}"
        return more

    return headers


JSON = "application/json"
ECHO = json.dumps({"runner_id": "builtin:echo", "input": {"text": "hi"}}).encode()

CASES = {
    "api root": ("GET", "/api/v1/", "superuser", {}, b""),
    "a list": ("GET", "/api/v1/runs", "superuser", {}, b""),
    "a list, head": ("HEAD", "/api/v1/runs", "superuser", {}, b""),
    "options": ("OPTIONS", "/api/v1/runs", "superuser", {}, b""),
    "no token": ("GET", "/api/v1/runs", None, {}, b""),
    "a bad token": ("GET", "/api/v1/runs", "bad", {}, b""),
    "not acceptable": ("GET", "/api/v1/runs", "superuser", {"Accept": "application/xml"}, b""),
    "not acceptable, bad token": ("GET", "/api/v1/runs", "bad",
                                  {"Accept": "application/xml"}, b""),
    "not acceptable, no token": ("GET", "/api/v1/runs", None, {"Accept": "application/xml"},
                                 b""),
    "the browsable API": ("GET", "/api/v1/runs", "superuser", {"Accept": "text/html"}, b""),
    "a method not allowed": ("PUT", "/api/v1/runs", "superuser", {"Content-Type": JSON}, b"{}"),
    "no such run": ("GET", "/api/v1/runs/no-such-run", "superuser", {}, b""),
    "no such route": ("GET", "/api/v1/no-such-thing", "superuser", {}, b""),
    "malformed JSON": ("POST", "/api/v1/runs", "superuser", {"Content-Type": JSON}, b"{nope"),
    "not UTF-8": ("POST", "/api/v1/runs", "superuser", {"Content-Type": JSON}, b'{"a": "\xff"}'),
    "an unsupported media type": ("POST", "/api/v1/runs", "superuser",
                                  {"Content-Type": "text/plain"}, b"hello"),
    "invalid input": ("POST", "/api/v1/runs", "superuser", {"Content-Type": JSON}, b"{}"),
    "not allowed": ("POST", "/api/v1/runs", "user", {"Content-Type": JSON}, ECHO),
    "a run": ("POST", "/api/v1/runs", "superuser", {"Content-Type": JSON}, ECHO),
    "a streamed run": ("POST", "/api/v1/runs?stream=1", "superuser", {"Content-Type": JSON},
                       ECHO),
    "a form post": ("POST", "/api/v1/auth/login", None,
                    {"Content-Type": "application/x-www-form-urlencoded"},
                    b"email=nobody%40example.com&password=wrong"),
    "a sign-in": ("POST", "/api/v1/auth/login", None, {"Content-Type": JSON},
                  b'{"email": "nobody@example.com", "password": "wrong"}'),
}


@pytest.mark.parametrize("case", CASES)
async def test_each_request_is_answered_as_stock_django_and_drf_answer_it(case, bearer,
                                                                          monkeypatch):
    method, path, who, headers, body = CASES[case]

    ours, stock = await both(monkeypatch, method, path, headers=bearer(who, **headers),
                             body=body)

    assert ours.normalised() == stock.normalised()


async def test_deleting_answers_204_without_a_body_or_its_type(bearer, user, agent, monkeypatch):
    def a_conversation() -> str:
        conversation = conversations.create(project_id=str(agent.project_id),
                                            agent_id=str(agent.pk), user_id=str(user.pk))
        return (f"/api/v1/projects/{agent.project_id}/agents/{agent.pk}/conversations/"
                f"{conversation.conversation_id}")

    ours, stock = await both(monkeypatch, "DELETE", a_conversation, headers=bearer("user"))

    assert ours.status == 204
    assert ours.normalised() == stock.normalised()


async def test_a_client_that_leaves_mid_run_gets_nothing_and_its_run_is_cancelled(
        builtin, bearer, monkeypatch):
    async def waits(context):
        await asyncio.sleep(scaled(30))
        yield {}

    await sync_to_async(builtin)("builtin:waits", waits)
    body = json.dumps({"runner_id": "builtin:waits", "input": {"text": "x"}}).encode()

    ours, stock = await both(monkeypatch, "POST", "/api/v1/runs", body=body,
                             headers=bearer("superuser", **{"Content-Type": JSON}),
                             leave_after=scaled(0.5))

    assert ours.normalised() == stock.normalised() == (None, [], "")
    statuses = await sync_to_async(lambda: sorted(
        AgentRun.objects.values_list("status", "status_reason")))()
    assert statuses == [("cancelled", "consumer_cancelled")] * 2
