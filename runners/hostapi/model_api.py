"""LangBot's model actions, answered in LangBot's shapes: `get_llm_models`, `invoke_llm`,
`invoke_llm_stream`, `count_tokens`, `invoke_embedding`, and `get_langbot_version`.

A call that names a run is the run's plugin's (checked like every in-run API), the run must
be active, and the model must be granted to it for the operation (`resources.models` of its
frozen authorization), else `model.not_granted`. Without a run a plugin may call any active
model, LangBot's rule for plain plugins. Calls go through `runners.providers`, so each is a
ModelCall with the run, its agent and project, and the calling plugin.
"""

from collections.abc import AsyncIterator
from contextlib import aclosing
from importlib import metadata
from typing import TYPE_CHECKING

from ledger.models import RunStatus
from runners.grants.llm import as_model_id
from runners.hostapi import run_api
from runners.models import LLMModel
from runners.protocol import HOST_NAME
from runners.providers import load_calls_off_the_loop
from runners.providers.errors import ProviderError
from runners.runtime.host_actions import HostError
from runners.runtime.host_process import host_process

if TYPE_CHECKING:
    from runners.providers.calls import CallInfo

VERSION = f"{HOST_NAME}/{metadata.version('langhost')}"
# The SDK sends `reasoning_level` only to a host that lists this feature.
API_FEATURES = ["llm.reasoning_level"]

# action -> (the operation its grant must allow, the model type it calls, the model id's key)
CALLS = {
    "invoke_llm": ("invoke", LLMModel.Type.CHAT, "llm_model_uuid"),
    "invoke_llm_stream": ("stream", LLMModel.Type.CHAT, "llm_model_uuid"),
    "count_tokens": ("count_tokens", LLMModel.Type.CHAT, "llm_model_uuid"),
    "invoke_embedding": ("invoke", LLMModel.Type.EMBEDDING, "embedding_model_uuid"),
    "invoke_rerank": ("rerank", LLMModel.Type.RERANK, "rerank_model_uuid"),
}
MAX_RERANK_DOCUMENTS = 1000
ACTIONS = frozenset({*CALLS, "get_llm_models", "get_langbot_version"})


def _granted(auth: dict) -> list[dict]:
    return (auth.get("resources") or {}).get("models") or []


async def _model_ids(data: dict, context: dict | None) -> list[str]:
    """The run's granted models; without a run, every active chat model."""
    if data.get("run_id"):
        _, auth = await run_api.authorize("get_llm_models", data, context)
        return [grant["model_id"] for grant in _granted(auth)]
    chat = LLMModel.objects.filter(is_active=True, model_type=LLMModel.Type.CHAT)
    return [str(pk) async for pk in chat.values_list("pk", flat=True)]


async def _call_info(action: str, data: dict, context: dict | None,
                     model_id: str) -> "CallInfo":
    caller = data.get("caller_plugin_identity") or ""
    calls = await load_calls_off_the_loop()
    if not data.get("run_id"):
        return calls.CallInfo(caller=caller)
    run, auth = await run_api.authorize(action, data, context)
    if run.status != RunStatus.RUNNING:
        raise HostError("run.not_active", f"run {run.run_id} is {run.status}; {action} needs "
                                          "an active run")
    operation = CALLS[action][0]
    grant = next((g for g in _granted(auth) if g.get("model_id") == model_id), None)
    if grant is None or operation not in (grant.get("operations") or []):
        for_operation = f" for {operation}" if grant is not None else ""
        raise HostError("model.not_granted",
                        f"model {model_id} is not granted to run {run.run_id}{for_operation}")
    deadline = run.deadline_at.timestamp() if run.deadline_at else None
    handle = host_process().handle(run.run_id)
    return calls.CallInfo(run_id=run.run_id, agent_id=run.agent_id, project_id=run.project_id,
                          caller=auth.get("plugin_identity") or caller, deadline=deadline,
                          journal=handle.journal_model_call if handle else None)


async def _prepared(action: str, data: dict,
                    context: dict | None) -> tuple[LLMModel, "CallInfo"]:
    """The model the call names and who it is for; refused (HostError) when not allowed."""
    _, model_type, key = CALLS[action]
    named = str(data.get(key) or "")
    model_id = as_model_id(named)
    call = await _call_info(action, data, context, model_id or named)
    model = None
    if model_id:
        model = await LLMModel.objects.select_related("provider").filter(
            pk=model_id, is_active=True, model_type=model_type).afirst()
    if model is None:
        raise HostError("model.not_found", f"no active {model_type} model {named!r}")
    return model, call


def _unavailable(model: LLMModel, exc: ProviderError) -> HostError:
    return HostError("model.unavailable", f"{model.name}: {exc}", retryable=exc.retryable)


def _params(data: dict) -> dict:
    extra = data.get("extra_args")
    return extra if isinstance(extra, dict) else {}


async def handle(action: str, data: dict, context: dict | None) -> dict:
    """Answer one model action (not the stream), or raise HostError."""
    if action == "get_langbot_version":
        return {"version": VERSION, "api_features": API_FEATURES}
    if action == "get_llm_models":
        return {"llm_models": await _model_ids(data, context)}
    model, call = await _prepared(action, data, context)
    calls = await load_calls_off_the_loop()
    messages, tools = data.get("messages") or [], data.get("funcs") or []
    try:
        if action == "invoke_embedding":
            texts = [str(text) for text in data.get("texts") or []]
            return {"vectors": await calls.invoke_embedding(model, texts, call=call)}
        if action == "invoke_rerank":
            return {"results": await _rerank(calls, model, data, call)}
        if action == "count_tokens":
            return {"tokens": await calls.count_tokens(model, messages, tools)}
        message, usage = await calls.invoke(model, messages, tools=tools, params=_params(data),
                                            reasoning_level=data.get("reasoning_level"),
                                            call=call)
    except ProviderError as exc:
        raise _unavailable(model, exc) from None
    return {"message": message, "usage": usage}


async def _rerank(calls, model: LLMModel, data: dict, call: "CallInfo") -> list[dict]:
    documents, query = data.get("documents"), data.get("query")
    if not isinstance(query, str) or not isinstance(documents, list) or not all(
            isinstance(text, str) for text in documents):
        raise HostError("model.bad_arguments", "invoke_rerank needs `query`, a string, and "
                                               "`documents`, a list of strings")
    if len(documents) > MAX_RERANK_DOCUMENTS:
        raise HostError("model.bad_arguments", f"invoke_rerank takes at most "
                                               f"{MAX_RERANK_DOCUMENTS} documents")
    top_k = data.get("top_k")
    top_k = top_k if isinstance(top_k, int) and top_k > 0 else None
    return await calls.invoke_rerank(model, query, documents, call=call, top_n=top_k,
                                     extra=_params(data))


async def stream(action: str, data: dict, context: dict | None) -> AsyncIterator[dict]:
    """`invoke_llm_stream`: `{"chunk": ...}` items, then `{"usage": ...}`."""
    model, call = await _prepared(action, data, context)
    calls = await load_calls_off_the_loop()
    try:
        async with aclosing(calls.stream(model, data.get("messages") or [],
                                         tools=data.get("funcs") or [], params=_params(data),
                                         reasoning_level=data.get("reasoning_level"),
                                         call=call)) as events:
            async for event in events:
                yield event
    except ProviderError as exc:
        raise _unavailable(model, exc) from None
