"""OpenTelemetry over real daphne: one LLM agent run with an MCP tool call is one trace sent to
an OTLP receiver — the request's span, the run's, a span per model call with the ledger's token
counts, the tool's span; and a run a runtime worker streams joins the request's trace."""

import select
import sys
from pathlib import Path

import httpx
import pytest

from runners.tests.langhost_process import langhost_env, popen_manage
from runners.tests.tools.conftest import SERVER
from tests.e2e.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, start_daphne, stop_daphne
from tests.e2e.test_worker_mode import REDIS_SERVER, redis_url, shared  # noqa: F401 (fixtures)
from tests.fake_providers import FakeProvider, Reply
from tests.otlp_receiver import OtlpReceiver
from tests.timing import scaled

pytestmark = pytest.mark.e2e
QA_DEFAULT = "plugin:e2e/agent-runner-qa/default"

ADD = Reply(text="", tool_calls=[{"id": "call-add", "name": "add",
                                  "arguments": '{"a": 2, "b": 3}'}],
            input_tokens=40, output_tokens=9)


@pytest.fixture
def receiver():
    receiver = OtlpReceiver()
    yield receiver
    receiver.stop()


@pytest.fixture
def provider():
    server = FakeProvider("openai").start()
    yield server
    server.stop()


def created(response) -> dict:
    assert response.status_code == 201, response.text
    return response.json()


@pytest.mark.slow("daphne, the runtime and an OTLP receiver, then a model and a tool call")
def test_an_agent_run_with_a_tool_call_is_one_trace(tmp_path, receiver, provider):
    url, process = start_daphne({"LANGHOST_DATA_DIR": str(tmp_path / "data"),
                                 "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                                 "OTEL_BSP_SCHEDULE_DELAY": "100"})
    try:
        token = httpx.post(f"{url}/api/v1/auth/login", json={
            "email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}).json()["access_token"]
        api = httpx.Client(base_url=url, timeout=scaled(60),
                           headers={"Authorization": f"Bearer {token}"})
        provider_row = created(api.post("/api/v1/model-providers", json={
            "name": "local", "kind": "openai", "base_url": provider.base_url, "api_key": "k"}))
        created(api.post("/api/v1/models", json={
            "name": "gpt-tools", "provider_id": provider_row["id"],
            "upstream_model": "gpt-tools-upstream", "model_type": "chat",
            "context_window": 8192}))
        created(api.post("/api/v1/mcp-servers", json={
            "name": "calc", "transport": "stdio", "command": sys.executable,
            "args": [str(SERVER)]}))
        agent_type = created(api.post("/api/v1/agent-types", json={
            "name": "Calculator", "slug": "calculator", "primary_model": "gpt-tools",
            "mcp_servers": ["calc"]}))
        project = created(api.post("/api/v1/projects", json={"name": "Sums", "slug": "sums"}))
        agents = f"/api/v1/projects/{project['id']}/agents"
        agent = created(api.post(agents, json={"agent_type_id": agent_type["id"],
                                               "project_id": project["id"], "name": "Calc"}))
        conversations = f"{agents}/{agent['id']}/conversations"
        conversation = created(api.post(conversations, json={}))
        provider.script(ADD, Reply(text="2 + 3 is 5.", input_tokens=60, output_tokens=7))

        answer = created(api.post(f"{conversations}/{conversation['id']}/messages",
                                  json={"text": "What is 2 + 3?"}))
        run_id = answer["run_id"]
        calls = api.get(f"/api/v1/runs/{run_id}/model-calls").json()["data"]

        def of_the_run(spans):
            run = [s for s in spans if s["attributes"].get("langhost.run.id") == run_id
                   and s["name"].startswith("invoke_agent")]
            return run and [s for s in spans if s["trace_id"] == run[0]["trace_id"]]

        spans = receiver.wait_for(lambda spans: len(of_the_run(spans) or []) >= 5)
    finally:
        stop_daphne(process)

    assert answer["status"] == "completed"
    trace = of_the_run(spans)
    by_name = {}
    for span in trace:
        by_name.setdefault(span["name"].split(" ")[0], []).append(span)
    (request,), (run,) = by_name["POST"], by_name["invoke_agent"]
    chats, (tool,) = by_name["chat"], by_name["execute_tool"]
    assert request["parent_id"] == "" and run["parent_id"] == request["span_id"]
    assert run["attributes"]["gen_ai.agent.name"] == "Calculator"  # the tree's answering agent
    assert run["attributes"]["langhost.run.status"] == "completed"
    assert [(c["attributes"]["gen_ai.usage.input_tokens"],
             c["attributes"]["gen_ai.usage.output_tokens"]) for c in chats] == \
        [(call["input_tokens"], call["output_tokens"]) for call in calls] == [(40, 9), (60, 7)]
    assert all(c["parent_id"] == run["span_id"] for c in chats + [tool])
    assert chats[0]["attributes"]["gen_ai.request.model"] == "gpt-tools-upstream"
    assert chats[0]["attributes"]["gen_ai.system"] == "openai"
    # What the user said stays out of the trace unless a setting lets it in.
    assert not any("2 + 3" in str(span["attributes"]) for span in trace)
    assert (tool["name"], tool["attributes"]["langhost.tool.source_id"]) == \
        ("execute_tool add", "calc")


@pytest.mark.slow("a web process and a runtime worker over Redis")
@pytest.mark.skipif(REDIS_SERVER is None, reason="needs redis-server: `make servers`")
def test_a_run_a_runtime_worker_streams_is_in_the_requests_trace(
        tmp_path, receiver, shared):  # noqa: F811
    tracing = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    worker = popen_manage("runtime", env=langhost_env(
        Path(shared["LANGHOST_DATA_DIR"]), Path(shared["LANGHOST_PLUGINS_DIR"]),
        REDIS_URL=shared["REDIS_URL"], OTEL_SERVICE_NAME="langhost-runtime", **tracing))
    try:
        ready, _, _ = select.select([worker.stdout], [], [], scaled(60))
        assert ready and worker.stdout.readline().startswith("runtime stdio ready;")
        url, web = start_daphne({**shared, "LANGHOST_RUNTIME_WORKER": "true", **tracing})
        try:
            token = httpx.post(f"{url}/api/v1/auth/login", json={
                "email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}).json()["access_token"]
            outcome = httpx.post(f"{url}/api/v1/runs", timeout=scaled(30), json={
                "runner_id": QA_DEFAULT, "input": {"text": "hi"}},
                headers={"Authorization": f"Bearer {token}"}).json()

            def streamed(spans):
                return [s for s in spans if s["name"] == f"runner {QA_DEFAULT}"
                        and s["attributes"].get("langhost.run.id") == outcome["run_id"]]

            def run_spans(spans):
                return [s for s in spans if s["name"].startswith("invoke_agent")
                        and s["attributes"].get("langhost.run.id") == outcome["run_id"]]

            def all_exported(spans):  # each process exports its spans in its own batches
                runs = run_spans(spans)
                return bool(streamed(spans) and runs and any(
                    s["span_id"] == runs[0]["parent_id"] for s in spans))

            spans = receiver.wait_for(all_exported)
        finally:
            stop_daphne(web)
    finally:
        worker.terminate()
        worker.wait(timeout=scaled(10))

    assert outcome["status"] == "completed"
    (elsewhere,) = streamed(spans)
    (run,) = run_spans(spans)
    (request,) = [s for s in spans if s["span_id"] == run["parent_id"]]
    assert (elsewhere["service"], run["service"]) == ("langhost-runtime", "langhost")
    assert elsewhere["trace_id"] == run["trace_id"] == request["trace_id"]
    assert elsewhere["parent_id"] == run["span_id"]


def asked(spans) -> list[dict]:
    return [span for span in spans if "/auth/me" in str(span) or "/attachments/" in str(span)]


def test_no_credential_leaves_in_a_span(tmp_path, receiver):
    url, process = start_daphne({"LANGHOST_DATA_DIR": str(tmp_path / "data"),
                                 "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                                 "OTEL_BSP_SCHEDULE_DELAY": "100"})
    link_token = "link-token-7f3a9c1e"
    try:
        token = httpx.post(f"{url}/api/v1/auth/login", json={
            "email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}).json()["access_token"]
        httpx.get(f"{url}/api/v1/auth/me?token={token}&page=2",
                  headers={"Authorization": f"Bearer {token}"})
        httpx.get(f"{url}/api/v1/runs/00000000-0000-0000-0000-000000000000/attachments/"
                  f"{link_token}")
        spans = receiver.wait_for(lambda spans: len(asked(spans)) == 2)
    finally:
        stop_daphne(process)

    sent = str(spans)
    assert len(asked(spans)) == 2  # both requests were traced
    assert token not in sent and token.split(".")[1] not in sent and link_token not in sent
    assert "token=REDACTED&page=2" in sent and "/attachments/REDACTED" in sent
