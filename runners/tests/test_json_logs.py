"""`LANGHOST_LOG_FORMAT=json`: every line is a JSON object, and those written while a run
executes carry its run id, conversation and agent."""

import json
import logging

import pytest

from runners.execution.orchestrator import Orchestrator
from runners.observability.logs import JsonLines, RunContext
from runners.protocol import AgentBinding, AgentEventEnvelope

pytestmark = [pytest.mark.processes, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []
        self.addFilter(RunContext())
        self.setFormatter(JsonLines())

    def emit(self, record):
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def json_lines():
    handler = Lines()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler.lines
    root.removeHandler(handler)
    root.setLevel(level)


async def test_the_lines_written_during_a_run_carry_its_ids(qa_gateway, json_lines):
    logging.getLogger("langhost.test").info("before any run")
    event = AgentEventEnvelope(conversation_id="logs", input={"text": "hi"})
    # The garbage runner sends a result of an unknown type: the host logs it, during the run.
    binding = AgentBinding(binding_id="logs", runner_id="plugin:e2e/agent-runner-qa/garbage")

    outcome = await Orchestrator(qa_gateway).run_to_end(event, binding, agent_name="Helper")
    logging.getLogger("langhost.test").info("after the run")

    during = [line for line in json_lines if line.get("run_id")]
    assert outcome["status"] == "completed"
    assert any("unknown result type" in line["message"] for line in during)
    assert all((line["run_id"], line["conversation_id"], line["agent"], line["trace_id"])
               == (outcome["run_id"], "logs", "Helper", outcome["run_id"]) for line in during)
    before, after = json_lines[0], json_lines[-1]
    assert (before["message"], after["message"]) == ("before any run", "after the run")
    assert "run_id" not in before and "run_id" not in after
    assert {"time", "level", "logger", "message"} <= set(before)
