"""LangBot's model actions as the host answers them: granted models only, LangBot's shapes,
every call a ModelCall of its run."""

from contextlib import aclosing
from datetime import UTC, datetime, timedelta

import pytest

from ledger.models import AgentRun, ModelCall
from runners.hostapi import model_api
from runners.hostapi.host import DjangoHost
from runners.runtime.host_actions import HostError
from tests.fake_providers import Reply

pytestmark = pytest.mark.django_db(transaction=True)

OWNER = "e2e/agent-runner-llm"
QUESTION = [{"role": "user", "content": "Why is the sky blue?"}]


@pytest.fixture
def models(make_model, openai_server):
    return {
        "granted": make_model(openai_server, "granted"),
        "invoke-only": make_model(openai_server, "invoke-only"),
        "other": make_model(openai_server, "other"),
        "vectors": make_model(openai_server, "vectors", model_type="embedding"),
        "retired": make_model(openai_server, "retired", is_active=False),
    }


def grant(model, *operations) -> dict:
    return {"model_id": str(model.pk), "model_type": model.model_type,
            "provider": model.provider.name, "operations": list(operations)}


@pytest.fixture
def run(models):
    return AgentRun.objects.create(
        run_id="run-models", event_id="evt-models", runner_id=f"plugin:{OWNER}/model-caller",
        status="running", agent_id="agent-7", project_id="project-3",
        deadline_at=datetime.now(UTC) + timedelta(minutes=5),
        authorization_json={"plugin_identity": OWNER, "available_apis": {}, "resources": {
            "models": [grant(models["granted"], "invoke", "stream", "count_tokens"),
                       grant(models["invoke-only"], "invoke"),
                       grant(models["vectors"], "invoke"),
                       grant(models["retired"], "invoke")]}})


async def call(action, model=None, key="llm_model_uuid", **data):
    data = {"run_id": "run-models", "caller_plugin_identity": OWNER, "messages": QUESTION,
            **({key: str(model.pk)} if model is not None else {}), **data}
    return await DjangoHost("test").handle_run_api(action, data, None)


async def refusal(action, model, **data) -> HostError:
    with pytest.raises(HostError) as refused:
        await call(action, model, **data)
    return refused.value


async def test_a_granted_model_answers_in_langbots_shape_and_is_recorded_for_the_run(
        run, models, openai_server):
    openai_server.script(Reply(text="Rayleigh scattering.", input_tokens=20, output_tokens=4))

    answer = await call("invoke_llm", models["granted"], extra_args={"temperature": 0.1},
                        reasoning_level="low")

    assert answer["message"]["role"] == "assistant"
    assert answer["message"]["content"] == "Rayleigh scattering."
    assert answer["usage"]["prompt_tokens"] == 20 and answer["usage"]["completion_tokens"] == 4
    sent = openai_server.calls()[-1].body
    assert (sent["temperature"], sent["reasoning_effort"]) == (0.1, "low")
    recorded = [row async for row in ModelCall.objects.values(
        "run_id", "agent_id", "project_id", "caller", "model_name", "operation", "status")]
    assert recorded == [{"run_id": "run-models", "agent_id": "agent-7", "project_id": "project-3",
                         "caller": OWNER, "model_name": "granted", "operation": "invoke",
                         "status": "ok"}]


async def test_the_stream_yields_chunks_then_usage(run, models, openai_server):
    openai_server.script(Reply(text="Blue light scatters more."))
    host = DjangoHost("test")
    data = {"run_id": "run-models", "caller_plugin_identity": OWNER, "messages": QUESTION,
            "llm_model_uuid": str(models["granted"].pk)}

    async with aclosing(host.stream_run_api("invoke_llm_stream", data, None)) as items:
        events = [event async for event in items]

    assert "".join(e["chunk"]["content"] or "" for e in events if "chunk" in e) == \
        "Blue light scatters more."
    assert set(events[-1]) == {"usage"}
    assert await ModelCall.objects.filter(run_id="run-models", operation="stream").aexists()


async def test_tokens_and_embeddings(run, models):
    assert (await call("count_tokens", models["granted"]))["tokens"] > 0
    vectors = await call("invoke_embedding", models["vectors"], key="embedding_model_uuid",
                         texts=["a", "b"])
    assert len(vectors["vectors"]) == 2


async def test_a_model_not_granted_to_the_run_is_refused_with_its_code_in_the_text(
        run, models, openai_server):
    refused = await refusal("invoke_llm", models["other"])

    assert refused.code == "model.not_granted"
    assert "model.not_granted" in str(refused)  # the runtime relays only the text
    assert openai_server.calls() == [] and not await ModelCall.objects.aexists()


async def test_an_operation_the_grant_does_not_allow_is_refused(run, models):
    refused = await refusal("count_tokens", models["invoke-only"])

    assert refused.code == "model.not_granted" and "for count_tokens" in str(refused)


async def test_unknown_inactive_and_wrong_type_models_are_not_found(run, models):
    assert (await refusal("invoke_llm", models["retired"])).code == "model.not_found"
    assert (await refusal("invoke_llm", models["vectors"])).code == "model.not_found"
    with pytest.raises(HostError) as refused:
        await DjangoHost("test").handle_run_api(
            "invoke_llm", {"caller_plugin_identity": OWNER, "llm_model_uuid": "nope",
                           "messages": QUESTION}, None)
    assert refused.value.code == "model.not_found"


async def test_a_failing_provider_is_model_unavailable(run, models, openai_server):
    openai_server.script(Reply(status=503, error="overloaded"))

    refused = await refusal("invoke_llm", models["granted"])

    assert refused.code == "model.unavailable" and refused.retryable
    assert "overloaded" in str(refused)
    assert await ModelCall.objects.filter(status="error", run_id="run-models").aexists()


async def test_calls_need_the_runs_own_plugin_and_an_active_run(run, models):
    assert (await refusal("invoke_llm", models["granted"], caller_plugin_identity="someone/else")
            ).code == "run.identity_mismatch"
    await AgentRun.objects.filter(run_id="run-models").aupdate(status="completed")
    assert (await refusal("invoke_llm", models["granted"])).code == "run.not_active"


async def test_a_plain_plugin_may_call_any_active_model(models, openai_server):
    answer = await DjangoHost("test").handle_run_api(
        "invoke_llm", {"caller_plugin_identity": OWNER, "llm_model_uuid": str(models["other"].pk),
                       "messages": QUESTION}, None)

    assert answer["message"]["content"] == "Hello there!"
    assert await ModelCall.objects.filter(run_id="", caller=OWNER).aexists()


async def test_model_lists_and_the_version(run, models):
    host = DjangoHost("test")
    every = await host.handle_run_api("get_llm_models", {}, None)
    in_run = await host.handle_run_api(
        "get_llm_models", {"run_id": "run-models", "caller_plugin_identity": OWNER}, None)
    version = await host.handle_run_api("get_langbot_version", {}, None)

    active_chat = [models[name] for name in ("granted", "invoke-only", "other")]
    assert every == {"llm_models": [str(model.pk) for model in active_chat]}
    assert in_run["llm_models"] == [g["model_id"] for g in run.authorization()["resources"]["models"]]
    assert version == {"version": model_api.VERSION, "api_features": ["llm.reasoning_level"]}
