"""`manage.py eval_agent AGENT EVALSET.yaml`, as a user runs it: five cases against an LLM
agent with an MCP tool (the scripted provider on 127.0.0.1 plays the model and the judge),
pass or fail per case and criterion, a case whose expected tool call did not happen fails, the
report written and kept."""

import json
import re
import sys

import pytest

from runners.tests.langhost_process import fresh_data_dir, langhost_env, manage
from runners.tests.tools.conftest import SERVER
from tests.fake_providers import FakeProvider, Reply

pytestmark = pytest.mark.processes

EVALSET = """
name: calculator basics
judge_model: gpt-eval
cases:
  - name: adds
    turns:
      - user: What is 2 + 3?
        expect: {reply_contains: "5", tool_calls: [add]}
  - name: greets
    turns:
      - user: Hello
        expect: {reply_exact: "Hi there!", tool_calls: []}
  - name: skips-the-tool
    turns:
      - user: What is 4 + 4?
        expect: {reply_contains: "8", tool_calls: [{name: add, arguments: {a: 4, b: 4}}]}
  - name: knows-capitals
    turns:
      - user: What is the capital of France?
        expect: {rubric: The reply names Paris.}
  - name: remembers
    turns:
      - user: Remember the number 7.
      - user: Which number did I ask you to remember?
        expect: {reply_contains: ["7"]}
"""

SETUP = f"""
from accounts.models import Project, User
from runners.models import AgentInstance, AgentType, LLMModel, McpServer, ModelProvider
provider = ModelProvider.objects.create(name="fake", kind="openai", base_url=BASE_URL)
LLMModel.objects.create(name="gpt-eval", provider=provider, upstream_model="gpt-eval-up",
                        context_window=8192)
McpServer.objects.create(name="calc", command={sys.executable!r}, args=[{str(SERVER)!r}])
kind = AgentType.objects.create(name="Calculator", slug="calculator",
                                runner_id="builtin:llm-agent", primary_model="gpt-eval",
                                mcp_servers=["calc"])
owner = User.objects.create_user(email="owner@example.com", password="Owner-Passw0rd-1")
project = Project.objects.create(name="Sums", slug="sums", owner=owner)
AgentInstance.objects.create(name="Calc", project=project, agent_type=kind)
"""


@pytest.fixture
def provider():
    server = FakeProvider("openai").start()
    yield server
    server.stop()


@pytest.mark.slow("five cases and their judge through `manage.py eval_agent`")
def test_five_cases_pass_or_fail_per_criterion_and_a_missed_tool_call_fails(tmp_path, provider):
    env = langhost_env(fresh_data_dir(tmp_path / "data"), tmp_path / "plugins")
    evalset = tmp_path / "calculator.yaml"
    evalset.write_text(EVALSET)
    ready = manage("shell", "-c", SETUP.replace("BASE_URL", repr(provider.base_url)), env=env)
    assert ready.returncode == 0, ready.stderr
    provider.script(
        Reply(text="", tool_calls=[{"id": "c1", "name": "add", "arguments": '{"a": 2, "b": 3}'}]),
        Reply(text="2 + 3 is 5."),
        Reply(text="Hi there!"),
        Reply(text="4 + 4 is 8."),  # answered without the tool it should have called
        Reply(text="Paris is the capital of France."),
        Reply(text="PASS\nIt names Paris."),  # the judge
        Reply(text="Noted."),
        Reply(text="You asked me to remember 7."))

    done = manage("eval_agent", "Calc", str(evalset), "--report", str(tmp_path / "r.json"),
                  env=env, timeout=120)

    assert done.returncode == 1, done.stderr  # a case failed
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["case", "criterion", "result", "detail"]
    results = {tuple(re.split(r" {2,}", line)[:2]): line for line in lines[1:-2]}
    assert " PASS " in results[("adds", "tool calls ['add']")]
    assert " PASS " in results[("greets", "reply is exactly")]
    assert " FAIL " in results[("skips-the-tool", "tool calls ['add']")]
    assert "called []" in results[("skips-the-tool", "tool calls ['add']")]
    assert " PASS " in results[("skips-the-tool", "reply contains '8'")]
    assert " PASS " in results[("knows-capitals", "rubric: The reply names Paris.")]
    assert lines[-2].startswith("4 of 5 case(s) passed")
    assert "skips-the-tool FAIL" in lines[-2] and "remembers PASS" in lines[-2]
    report = json.loads((tmp_path / "r.json").read_text())
    assert (report["passed"], report["failed"]) == (4, 1)
    remembers = report["cases"][-1]
    assert len(remembers["turns"]) == 2 and remembers["turns"][1]["reply"].endswith("7.")
    assert report["cases"][0]["turns"][0]["tool_calls"] == [{"name": "add",
                                                            "arguments": {"a": 2, "b": 3}}]
    assert "1 of 5 case(s) failed" in done.stderr
    # The second turn of a case is in the same conversation: the model saw the first.
    last = provider.calls()[-1].body["messages"]
    assert any("Remember the number 7." in str(m.get("content")) for m in last)


def test_an_evalset_with_a_bad_field_is_refused_naming_it(tmp_path):
    env = langhost_env(fresh_data_dir(tmp_path / "data"), tmp_path / "plugins")
    evalset = tmp_path / "bad.yaml"
    evalset.write_text("name: x\ncases:\n  - name: a\n    turns: []\n")

    done = manage("eval_agent", "anyone", str(evalset), env=env)

    assert done.returncode == 1
    assert "cases.0.turns" in done.stderr and "Traceback" not in done.stderr
