"""The issue's acceptance run: the echo fixture through the orchestrator, journaled in full."""

import pytest
from django.db import connection

from runners.execution.orchestrator import Orchestrator
from runners.protocol import AgentBinding, AgentEventEnvelope

pytestmark = [pytest.mark.processes, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]

ECHO = "plugin:e2e/agent-runner-qa/default"


def echo_event(**overrides) -> AgentEventEnvelope:
    fields = {"event_id": "e2e-orchestrator-event-001", "conversation_id": "e2e-conversation",
              "input": {"text": "hello from orchestrator e2e"}, **overrides}
    return AgentEventEnvelope(**fields)


def global_binding(**config) -> AgentBinding:
    return AgentBinding(binding_id="e2e-global", scope={"scope_type": "global"}, runner_id=ECHO,
                        runner_config=config, state_policy={"state_scopes": ["conversation"]})


def sql(query: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(query)
        return cursor.fetchall()


async def test_echo_run_yields_one_assistant_message(qa_gateway):
    messages = [m async for m in Orchestrator(qa_gateway).run(echo_event(), global_binding())]

    assert [(m.type, m.data["message"]["content"]) for m in messages] == [
        ("message.completed", "e2e echo: hello from orchestrator e2e")
    ]


async def test_echo_run_is_journaled_with_events_and_state(qa_gateway):
    from asgiref.sync import sync_to_async

    await Orchestrator(qa_gateway).run_to_end(echo_event(), global_binding())

    rows = await sync_to_async(sql)(
        "SELECT status, runner_id FROM agent_run WHERE event_id = 'e2e-orchestrator-event-001'")
    assert rows == [("completed", ECHO)]
    types = await sync_to_async(sql)("SELECT type FROM agent_run_event ORDER BY sequence")
    assert {"state.updated", "message.completed", "run.completed"} <= {t for (t,) in types}
    (value,), = await sync_to_async(sql)(
        "SELECT value_json FROM agent_runner_state WHERE state_key = 'e2e.echo_count'")
    assert '"count": 1' in value


async def test_a_run_that_outgrows_its_storage_cap_fails_saying_so(qa_gateway, settings):
    settings.LANGHOST_RUN_MAX_STORED_BYTES = 200
    outcome = await Orchestrator(qa_gateway).run_to_end(
        echo_event(event_id="e2e-output-limit", input={"text": "x" * 500}), global_binding())

    assert outcome["status"] == "failed"
    assert "run.output_limit" in outcome["status_reason"]


async def test_a_message_longer_than_one_pipe_chunk_reaches_the_runner_whole(qa_gateway):
    text = "long input " * 3000  # over 16 KiB: sent to the runtime in chunks

    outcome = await Orchestrator(qa_gateway).run_to_end(
        echo_event(event_id="e2e-long-input", input={"text": text}), global_binding())

    assert outcome["status"] == "completed"
    assert outcome["messages"][0]["data"]["message"]["content"] == f"e2e echo: {text}"
