"""Fixtures for the conversation, message and agent-tree tests (import them into a module)."""

import pytest


@pytest.fixture(name="builtin")
def register_builtin(monkeypatch, db):
    """`builtin(runner_id, run)` registers an in-process runner, and its descriptor, for one test.

    `run(context)` is an async generator of results (it is not handed the run's handle);
    `result(context, seq, type, data)` helps.
    """
    from runners.plugins.registry import BUILTINS, ensure_builtins_sync

    def register(runner_id, run):
        monkeypatch.setitem(BUILTINS, runner_id, {
            "run": lambda context, handle: run(context), "label": {"en_US": runner_id}, "description": {},
            "capabilities": {}, "permissions": {},
        })
        ensure_builtins_sync()  # what `migrate` does for the real built-ins
        return runner_id

    return register


def result(context, sequence, type_, data, usage=None):
    return {"run_id": context["run_id"], "type": type_, "data": data, "usage": usage,
            "sequence": sequence}


def reply_results(context, content, usage=None):
    """A complete run answering `content`."""
    return [
        result(context, 1, "message.completed",
               {"message": {"role": "assistant", "content": content}}, usage),
        result(context, 2, "run.completed", {"finish_reason": "stop"}, usage),
    ]


def read_body(response) -> bytes:
    """The whole body; message responses stream from an async iterator (the run happens as
    the body is read)."""
    from asgiref.sync import async_to_sync

    if not response.streaming:
        return response.content

    async def collect():
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)()


def conversations_url(agent) -> str:
    return f"/api/v1/projects/{agent.project_id}/agents/{agent.pk}/conversations"


async def through_the_door(user, agent, parts, conversation=None):
    """`(outcome, conversation)` of a message of `parts` (`Part`s) to `agent`, in
    `conversation` (a new one if None), sent through the door the messages endpoint uses — on
    this loop, which the runtime's host actions need free."""
    from asgiref.sync import sync_to_async

    from ledger.services import conversations
    from runners.conversations import services as door
    from runners.conversations.callers import Caller

    conversation = conversation or await sync_to_async(conversations.create)(
        project_id=str(agent.project_id), agent_id=str(agent.pk), user_id=str(user.pk))
    prepared = await sync_to_async(door.prepare_agent_run)(
        Caller(user), agent_id=agent.pk, conversation_id=conversation.client_id,
        parts=parts)
    return await door.run_to_end(prepared), conversation
