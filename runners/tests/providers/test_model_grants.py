"""Which models a run may call: its binding's selections, narrowed by the runner's manifest."""

import pytest
from langbot_plugin.api.entities.builtin.runner.context import RunnerContext

from ledger.models import AgentRun, ModelCall
from ledger.services import runs as ledger
from runners.agent.builtins import BUILTIN_RUNNERS
from runners.execution import context
from runners.grants.llm import model_grants
from runners.models import LLM_AGENT_RUNNER_ID, RunnerDescriptor
from runners.protocol import AgentBinding, AgentEventEnvelope

pytestmark = pytest.mark.django_db(transaction=True)

ALL_OPERATIONS = ["invoke", "stream", "count_tokens"]


def descriptor(models=ALL_OPERATIONS, config_schema=()) -> RunnerDescriptor:
    return RunnerDescriptor(id="plugin:e2e/agent-runner-llm/model-caller", runner_name="model-caller",
                            permissions={"models": list(models)},
                            config_schema=list(config_schema))


def binding(policy_ids=None, **config) -> AgentBinding:
    return AgentBinding(binding_id="grants", runner_id="plugin:e2e/agent-runner-llm/model-caller",
                        runner_config=config,
                        resource_policy={"allowed_model_uuids": policy_ids})


@pytest.fixture
def catalogue(make_model, openai_server):
    return {
        "primary": make_model(openai_server, "primary", context_window=32000),
        "fallback": make_model(openai_server, "fallback", context_window=4000),
        "extra": make_model(openai_server, "extra"),
        "policy": make_model(openai_server, "policy"),
        "vectors": make_model(openai_server, "vectors", model_type="embedding"),
        "reranker": make_model(openai_server, "reranker", model_type="rerank"),
        "retired": make_model(openai_server, "retired", is_active=False),
    }


def granted_names(grants, catalogue) -> list[str]:
    names = {str(model.pk): name for name, model in catalogue.items()}
    return [names[resource["model_id"]] for resource in grants.models]


async def test_primary_then_fallbacks_then_config_and_policy_once_each_missing_skipped(catalogue):
    grants = await model_grants(
        binding(model="primary", fallback_models=["retired", "nowhere", "fallback", "primary"],
                models=["extra", "vectors", "reranker"],
                policy_ids=[str(catalogue["policy"].pk), str(catalogue["extra"].pk)]),
        descriptor())

    assert granted_names(grants, catalogue) == ["primary", "fallback", "extra", "vectors", "policy"]
    assert grants.models[0] == {"model_id": str(catalogue["primary"].pk), "model_type": "chat",
                                "provider": catalogue["primary"].provider.name,
                                "operations": ALL_OPERATIONS}
    assert grants.models[3]["operations"] == ["invoke"]  # what invoke_embedding is checked for
    assert grants.context_window == 32000


async def test_a_runner_whose_manifest_asks_for_no_model_operation_gets_no_model(catalogue):
    for models in ([], ["rerank"]):
        grants = await model_grants(binding(model="primary"), descriptor(models))
        assert grants.models == [] and grants.context_window is None


async def test_a_narrower_manifest_narrows_the_operations(catalogue):
    grants = await model_grants(binding(model="primary", models=["vectors"]), descriptor(["stream"]))

    assert [resource["operations"] for resource in grants.models] == [["stream"]]


async def test_the_runners_own_model_selectors_grant_their_models(catalogue):
    schema = [{"name": "llm", "type": "llm-model-selector"},
              {"name": "chain", "type": "model-fallback-selector"},
              {"name": "other", "type": "string"}]
    grants = await model_grants(
        binding(llm=str(catalogue["extra"].pk), other="policy",
                chain={"primary": "__none__", "fallbacks": ["fallback"]}),
        descriptor(config_schema=schema))

    assert granted_names(grants, catalogue) == ["extra", "fallback"]


async def test_the_context_lists_the_grants_and_the_first_models_window(catalogue):
    grants = await model_grants(binding(model="fallback", models=["primary"]), descriptor())
    event = AgentEventEnvelope(input={"text": "hi"})
    apis = context.available_apis(event, binding(), descriptor())

    payload = context.build_context(run_id="run-grants", event=event, binding=binding(),
                                    apis=apis, state={}, deadline_at=None, grants=grants)
    snapshot = context.authorization_snapshot(event, binding(), descriptor(), apis, {}, grants)

    RunnerContext.model_validate(payload)
    assert payload["resources"]["models"] == grants.models == snapshot["resources"]["models"]
    assert payload["runtime"]["metadata"]["model_context_window_tokens"] == 4000


async def test_the_built_in_llm_agent_is_granted_its_models_too(catalogue):
    builtin = RunnerDescriptor(id=LLM_AGENT_RUNNER_ID, runner_name="llm-agent",
                               permissions=BUILTIN_RUNNERS[LLM_AGENT_RUNNER_ID]["permissions"])
    grants = await model_grants(binding(model="primary", fallback_models=["fallback"]), builtin)

    assert granted_names(grants, catalogue) == ["primary", "fallback"]


async def test_a_run_that_reports_no_usage_ends_with_the_sum_of_its_model_calls():
    for run_id in ("silent", "reporting", "idle"):
        await AgentRun.objects.acreate(run_id=run_id, event_id=f"evt-{run_id}",
                                       runner_id="builtin:echo", status="running")
    for tokens in (10, 30):
        await ModelCall.objects.acreate(run_id="silent", model_id="m", model_name="m",
                                        status="ok", input_tokens=tokens, output_tokens=2,
                                        cost="0.5")
    await ModelCall.objects.acreate(run_id="reporting", model_id="m", model_name="m",
                                    status="ok", input_tokens=99)

    await ledger.finish_run("silent", "completed")
    await ledger.finish_run("reporting", "completed", usage={"total_tokens": 7})
    await ledger.finish_run("idle", "completed")

    usage = {run.run_id: run.usage_json async for run in AgentRun.objects.all()}
    assert usage == {"silent": {"prompt_tokens": 40, "completion_tokens": 4, "total_tokens": 44,
                                "cached_tokens": 0, "cost": 1.0},
                     "reporting": {"total_tokens": 7}, "idle": None}
