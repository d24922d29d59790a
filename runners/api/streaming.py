"""Response bodies of the endpoints that start runs.

The run happens on the event loop, never holding a thread: NDJSON frames streamed as results
arrive (`?stream=1`), or one JSON outcome once it has ended, awaited by the (async) view.
A client that goes away closes the run either way (Django closes the stream, or cancels the
view): it ends `consumer_cancelled` at once.
"""

from contextlib import aclosing

from django.http import HttpResponse, StreamingHttpResponse
from rest_framework import status

from ledger import wire
from ledger.wire import ndjson
from runners.api.serializers.conversations import MessageOutcomeSerializer
from runners.api.serializers.runs import BackgroundRunSerializer, RunOutcomeSerializer
from runners.conversations import background
from runners.conversations import services as door
from runners.protocol import ConversationBusy, RunRefused


def wants_stream(request) -> bool:
    return request.query_params.get("stream") in {"1", "true", "yes"}


def wants_background(request) -> bool:
    return request.query_params.get("background") in {"1", "true", "yes"}


def refused_status(exc: RunRefused) -> int:
    """409 for a conversation busy with another run, 503 for a run that cannot start now."""
    return (status.HTTP_409_CONFLICT if isinstance(exc, ConversationBusy)
            else status.HTTP_503_SERVICE_UNAVAILABLE)


async def background_response(prepared: door.PreparedRun) -> HttpResponse:
    """202 with the run started apart from the request (`background.start_in_background`),
    `queued` while it waits its turn in its conversation; 409 or 503 with a `run.refused`
    frame if it could not start."""
    try:
        started = await background.start_in_background(prepared)
    except RunRefused as exc:
        return HttpResponse(wire.dumps(refused_frame(exc)), content_type="application/json",
                            status=refused_status(exc))
    return HttpResponse(wire.dumps(_BACKGROUND.to_representation(started)),
                        content_type="application/json", status=status.HTTP_202_ACCEPTED)


async def response(body, stream: bool, prepared: door.PreparedRun):
    """201: NDJSON streamed as `body` yields it, or the outcome `body` yields once, as JSON;
    200 for the outcome of an event sent before (its earlier run's, replayed)."""
    if stream:
        return StreamingHttpResponse(body, status=status.HTTP_201_CREATED,
                                     content_type="application/x-ndjson")
    async with aclosing(body):
        outcome = [chunk async for chunk in body][-1]
    if outcome.get("type") == "run.refused":
        return HttpResponse(wire.dumps(outcome), content_type="application/json",
                            status=outcome.pop("http_status"))
    replayed = outcome.get("run_id") not in (None, prepared.run_id) \
        and outcome.get("status") != "steered"
    return HttpResponse(wire.dumps(outcome), content_type="application/json",
                        status=status.HTTP_200_OK if replayed else status.HTTP_201_CREATED)


# Built once: a serializer's fields are deep-copied for each instance, and these are only
# read.
_RUN_OUTCOME = RunOutcomeSerializer()
_MESSAGE_OUTCOME = MessageOutcomeSerializer()
_BACKGROUND = BackgroundRunSerializer()


def run_outcome(outcome: dict) -> dict:
    return _RUN_OUTCOME.to_representation(outcome)


def started_frame(prepared: door.PreparedRun, agent_name: str | None = None) -> dict:
    frame = {"type": "run.started", "run_id": prepared.run_id,
             "event_id": prepared.public_event_id}
    return {**frame, "agent": agent_name} if agent_name is not None else frame


def refused_frame(exc: RunRefused, agent_name: str | None = None) -> dict:
    frame = {"type": "run.refused", "detail": str(exc)}
    if isinstance(exc, ConversationBusy):
        frame["active_run_id"] = exc.run_id
    return {**frame, "agent": agent_name} if agent_name is not None else frame


async def run_body(prepared: door.PreparedRun, stream: bool):
    """`POST /runs`: `{run_id, status, status_reason, messages, usage, ...}`, or frames
    `run.started`, messages, `run.finished`."""
    try:
        if not stream:
            yield run_outcome(await door.run_to_end(prepared))
            return
        yield ndjson(started_frame(prepared))
        async for message in door.execute(prepared, announced=True):
            yield ndjson(message.as_dict())
        yield ndjson({"type": "run.finished", **run_outcome(await door.outcome(prepared))})
    except RunRefused as exc:
        yield ndjson(refused_frame(exc)) if stream else {**refused_frame(exc),
                                                         "http_status": refused_status(exc)}


def reply_of(message_data: dict | None) -> dict | None:
    message = (message_data or {}).get("message")
    if not isinstance(message, dict):
        return None
    reply = {"role": message.get("role") or "assistant", "content": message.get("content")}
    citations = (message.get("provider_specific_fields") or {}).get("citations")
    return {**reply, "citations": citations} if isinstance(citations, list) else reply


def message_outcome(outcome: dict, agent_name: str, reply: dict | None) -> dict:
    return _MESSAGE_OUTCOME.to_representation({
        "run_id": outcome.get("run_id"), "agent": agent_name, "status": outcome.get("status"),
        "status_reason": outcome.get("status_reason") or "", "reply": reply,
        "usage": outcome.get("usage"), "conversation_id": outcome.get("conversation_id"),
        "event_id": outcome.get("event_id")})


async def message_body(prepared: door.PreparedRun, stream: bool):
    """A message to an agent: `{run_id, agent, status, status_reason, reply, usage, ...}`, or
    frames `run.started`, messages, `run.finished` (or `run.refused`)."""
    agent_name = prepared.agent_name
    reply = None
    try:
        if stream:
            yield ndjson(started_frame(prepared, agent_name))
        messages = []
        async for message in door.execute(prepared, wait_durable=stream, announced=stream):
            messages.append(message.as_dict())
            if message.type == "message.completed":
                reply = reply_of(message.data) or reply
            if stream:
                yield ndjson(message.as_dict())
        body = message_outcome(await door.outcome(prepared, messages), agent_name, reply)
        yield ndjson({"type": "run.finished", **body}) if stream else body
    except RunRefused as exc:
        frame = refused_frame(exc, agent_name)
        yield ndjson(frame) if stream else {**frame, "http_status": refused_status(exc)}
