"""The SQL an echo run and an agent's message execute: what `bench/run_overhead.py` prints on
its `sql:` line and `runners/tests/test_hot_path_sql.py` pins.

A run's statements come from several threads (the request's, the shared sync thread, the
journal's writes), each with its own connection, so they are recorded where every cursor
executes, not on one connection; and by context (which `sync_to_async` and the run's tasks
carry along), so that what the process does meanwhile on its own (its lease renewals and its
watch for cancels, once a second) is not counted as the run's.
"""

import contextlib
import contextvars
import re
import threading
from collections import Counter
from collections.abc import Iterator

from asgiref.sync import sync_to_async
from django.db.backends import utils

from runners.conversations import services as door
from runners.conversations.callers import Caller
from runners.conversations.input import Part
from runners.execution.orchestrator import Orchestrator
from runners.protocol import AgentBinding, AgentEventEnvelope

ECHO_BINDING = AgentBinding(binding_id="sql", runner_id="builtin:echo",
                            state_policy={"state_scopes": ["conversation"]})


_recording: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "sql_recording", default=None)


@contextlib.contextmanager
def recorded() -> Iterator[list[str]]:
    """Every statement executed inside the block on its behalf, in any thread, in order."""
    seen: list[str] = []
    lock = threading.Lock()
    execute = utils.CursorWrapper._execute_with_wrappers

    def recording(cursor, sql, params, many, executor):
        if _recording.get() is seen:
            with lock:
                seen.append(sql)
        return execute(cursor, sql, params, many, executor)

    utils.CursorWrapper._execute_with_wrappers = recording
    token = _recording.set(seen)
    try:
        yield seen
    finally:
        _recording.reset(token)
        utils.CursorWrapper._execute_with_wrappers = execute


_TABLE = re.compile(r'\b(?:FROM|INTO|UPDATE)\s+"?(\w+)"?', re.IGNORECASE)


def shape(sql: str) -> str:
    """`SELECT ledger_agentrun`: the statement's verb and first table."""
    verb = sql.split(None, 1)[0].upper()
    table = _TABLE.search(sql)
    return f"{verb} {table.group(1)}" if table else verb


def shapes(statements: list[str]) -> Counter:
    return Counter(shape(sql) for sql in statements)


async def echo_run(orchestrator: Orchestrator, conversation_id: str = "sql") -> list[str]:
    """A run of `builtin:echo` through the orchestrator, as `POST /runs` makes it."""
    with recorded() as seen:
        async for _ in orchestrator.run(
                AgentEventEnvelope(conversation_id=conversation_id, input={"text": "hi"}),
                ECHO_BINDING):
            pass
    return seen


async def agent_message(user, agent, conversation_id: str) -> list[str]:
    """A message to an agent in one of its user's conversations, answered without streaming,
    as `POST .../conversations/{id}/messages` makes it (from after its sign-in)."""
    with recorded() as seen:
        prepared = await sync_to_async(door.prepare_agent_run)(
            Caller(user), agent_id=agent.pk, conversation_id=conversation_id,
            parts=[Part(text="hi")])
        await door.run_to_end(prepared)
    return seen
