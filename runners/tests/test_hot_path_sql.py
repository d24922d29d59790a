"""The SQL of the run path's commonest requests, pinned: a statement added to every run is a
conscious change (this list changes with it), not a slow drift. `bench/run_overhead.py`
prints the same counts on its `sql:` line."""

import pytest
from asgiref.sync import sync_to_async

from ledger.services import conversations
from runners.execution import journal
from runners.execution.orchestrator import Orchestrator
from runners.plugins import events, registry
from runners.plugins.gateway import get_gateway
from tests import sql_statements as sql
from tests.timing import scaled

pytestmark = pytest.mark.django_db(transaction=True)

# In a steady state: the runner's descriptor and the models' cache were read by a run before.
ECHO_RUN = {
    # one transaction: the start kept back and written with the run's results and end
    "BEGIN": 1, "SELECT event_log": 1, "INSERT event_log": 1, "INSERT agent_run": 1,
    "INSERT transcript": 2, "SELECT agent_runner_state": 1, "INSERT agent_run_event": 1,
    "UPDATE run_hour": 1,
}
AGENT_MESSAGE = {
    # the door: the agent, its conversation, its tree, who answers, its binding
    "SELECT runners_agentinstance": 1, "SELECT conversation": 1, "SELECT runners_subagent": 1,
    "SELECT transcript": 1, "SELECT runners_binding": 1,
    # the agent is working, then idle unless another run of its goes on
    "UPDATE runners_agentinstance": 2, "SELECT agent_run": 2,
    # the start: written at once, as the run takes its conversation's turn
    "BEGIN": 2, "SELECT event_log": 1, "INSERT event_log": 1, "INSERT agent_run": 1,
    "INSERT transcript": 2, "SELECT agent_runner_state": 1,
    # the results and the end, the rollups
    "INSERT agent_run_event": 1, "UPDATE agent_run": 1, "UPDATE agent_totals": 1,
    "UPDATE run_hour": 1,
    # where its outcome goes: its type's webhook and the project's
    "SELECT runners_agenttype": 1, "SELECT webhooks_projectwebhook": 1,
    "UPDATE conversation": 1,
}


def _listed(statements: list[str]) -> str:
    return "\n".join(statements)


@pytest.fixture(autouse=True)
def start_waits_for_results(monkeypatch):
    # However slow the machine, the echo's results come within the start's patience, and the
    # descriptor the first run read is still cached when the second runs.
    monkeypatch.setattr(journal, "START_PATIENCE_SECONDS", scaled(5.0))
    monkeypatch.setattr(registry, "CACHE_SECONDS", scaled(60.0))
    monkeypatch.setattr(registry, "_cache", {})
    monkeypatch.setattr(events, "CACHE_SECONDS", scaled(60.0))
    events.forget_listening_plugins()


async def test_an_echo_run_executes_the_pinned_statements():
    orchestrator = Orchestrator(get_gateway())
    await sql.echo_run(orchestrator, "warm-up")

    statements = await sql.echo_run(orchestrator)

    assert sql.shapes(statements) == ECHO_RUN, _listed(statements)


async def test_an_agent_message_executes_the_pinned_statements(
        user, project, make_agent_type, make_agent):
    agent_type = await sync_to_async(make_agent_type)(runner_id="builtin:echo")
    agent = await sync_to_async(make_agent)(project, agent_type)
    conversation = await sync_to_async(conversations.create)(
        project_id=str(project.pk), agent_id=str(agent.pk), user_id=str(user.pk))
    await sql.agent_message(user, agent, conversation.client_id)

    statements = await sql.agent_message(user, agent, conversation.client_id)

    assert sql.shapes(statements) == AGENT_MESSAGE, _listed(statements)
