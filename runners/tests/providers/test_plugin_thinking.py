"""Plugin runners think through the host, over the real SDK runtime: a fixture runner calls the
models granted to its run (and one that is not), and the shipped thinker answers with its
model."""

import json
import shutil
from pathlib import Path

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async

from ledger.models import AgentRun, ModelCall
from runners.execution.orchestrator import Orchestrator
from runners.hostapi.model_api import VERSION
from runners.plugins.gateway import LocalGateway
from runners.protocol import AgentBinding, AgentEventEnvelope
from runners.tests.conftest import plugins_dir_with
from tests.fake_providers import Reply

pytestmark = [pytest.mark.processes, pytest.mark.asyncio(loop_scope="session"), pytest.mark.django_db(transaction=True)]

SHIPPED_PLUGINS = Path(__file__).resolve().parents[3] / "plugins"
CALLER = "e2e/agent-runner-llm"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def gateway(tmp_path_factory):
    """One runtime with the model-calling fixture and a copy of the shipped thinker."""
    tmp = tmp_path_factory.mktemp("thinking-runtime")
    plugins = plugins_dir_with(tmp, "e2e__agent-runner-llm")
    # A copy: the runtime writes its temp files into the plugin folders it runs.
    shutil.copytree(SHIPPED_PLUGINS / "langhost__thinker", plugins / "langhost__thinker",
                    ignore=shutil.ignore_patterns("data", "__pycache__"))
    gateway = LocalGateway(plugins_dir=plugins, runtime_dir=tmp / "runtime", url="",
                           instance="thinking-tests")
    yield gateway
    await gateway.stop()


@pytest.fixture
def models(make_model, openai_server):
    return {
        "granted": make_model(openai_server, "granted-chat", context_window=32000),
        "fallback": make_model(openai_server, "fallback-chat"),
        "other": make_model(openai_server, "other-chat"),
        "vectors": make_model(openai_server, "vectors", model_type="embedding"),
    }


def event(text: str) -> AgentEventEnvelope:
    return AgentEventEnvelope(agent_id="agent-llm", project_id="project-llm",
                              conversation_id="conv-llm", input={"text": text})


async def test_a_runner_calls_its_granted_models_and_is_refused_the_others(
        gateway, models, openai_server):
    binding = AgentBinding(binding_id="llm", runner_id=f"plugin:{CALLER}/model-caller",
                           runner_config={"model": "granted-chat",
                                          "fallback_models": ["missing", "fallback-chat"],
                                          "models": ["vectors"]})

    outcome = await Orchestrator(gateway).run_to_end(event("think"), binding)

    assert outcome["status"] == "completed", outcome
    report = json.loads(outcome["messages"][-1]["data"]["message"]["content"])
    ids = {name: str(model.pk) for name, model in models.items()}
    assert [(g["model_id"], g["operations"]) for g in report["granted"]] == [
        (ids["granted"], ["invoke", "stream", "count_tokens"]),
        (ids["fallback"], ["invoke", "stream", "count_tokens"]), (ids["vectors"], ["invoke"])]
    assert report["context_window"] == 32000
    assert report["sdk_models"] == [ids["granted"], ids["fallback"], ids["vectors"]]
    # A plain plugin call lists every active chat model, as LangBot does.
    assert report["host_models"]["ok"]["llm_models"] == [ids["fallback"], ids["granted"],
                                                         ids["other"]]
    assert report["invoke"]["ok"]["message"]["content"] == "Hello there!"
    assert report["invoke"]["ok"]["usage"]["total_tokens"] == 17
    assert report["stream"] == "Hello there!"
    deltas = [m["data"]["chunk"]["content"] for m in outcome["messages"]
              if m["type"] == "message.delta"]
    assert "".join(deltas) == "Hello there!"
    assert report["tokens"]["ok"] > 0
    assert len(report["embedding"]["ok"]) == 2
    # The SDK refuses an ungranted model itself; past it, the host refuses it too.
    assert "PermissionDeniedError" in report["sdk_refused"]["error"]
    assert "model.not_granted" in report["host_refused"]["error"]
    assert report["version"]["ok"] == VERSION
    assert "llm.reasoning_level" in report["version_info"]["ok"]["api_features"]
    assert openai_server.calls()[0].body["reasoning_effort"] == "low"

    run_id = outcome["run_id"]
    calls = [row async for row in ModelCall.objects.order_by("id").values_list(
        "run_id", "agent_id", "project_id", "caller", "model_name", "operation")]
    assert calls == [(run_id, "agent-llm", "project-llm", CALLER, "granted-chat", "invoke"),
                     (run_id, "agent-llm", "project-llm", CALLER, "granted-chat", "stream"),
                     (run_id, "agent-llm", "project-llm", CALLER, "vectors", "embedding")]
    # The runner reports no usage: the run's is the sum of its model calls.
    assert outcome["usage"]["total_tokens"] == 17 + 17 + 6
    run = await AgentRun.objects.aget(run_id=run_id)
    assert (await sync_to_async(run.authorization)())["resources"]["models"] == report["granted"]


async def test_the_shipped_thinker_streams_its_models_answer(gateway, models, openai_server):
    openai_server.script(Reply(text="Because of Rayleigh scattering."))
    binding = AgentBinding(binding_id="thinker", runner_id="plugin:langhost/thinker/thinker",
                           runner_config={"model": "granted-chat",
                                          "prompt": "You answer in one sentence."})

    outcome = await Orchestrator(gateway).run_to_end(event("Why is the sky blue?"), binding)

    assert outcome["status"] == "completed", outcome
    deltas = "".join(m["data"]["chunk"]["content"] for m in outcome["messages"]
                     if m["type"] == "message.delta")
    assert deltas == outcome["messages"][-1]["data"]["message"]["content"] == \
        "Because of Rayleigh scattering."
    sent = openai_server.calls()[-1].body["messages"]
    assert sent == [{"role": "system", "content": "You answer in one sentence."},
                    {"role": "user", "content": "Why is the sky blue?"}]
    assert outcome["usage"]["total_tokens"] == 17


async def test_the_thinker_without_a_model_fails_saying_so(gateway):
    binding = AgentBinding(binding_id="thinker", runner_id="plugin:langhost/thinker/thinker")

    outcome = await Orchestrator(gateway).run_to_end(event("hello?"), binding)

    assert outcome["status"] == "failed"
    assert outcome["status_reason"].startswith("model.not_granted")
