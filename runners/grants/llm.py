"""The models a run may call: its `resources.models`, frozen into its authorization.

A runner is granted models only when its manifest asks for model operations (chat models get
the manifest's subset of invoke/stream/count_tokens; embedding models `invoke`, the operation
the SDK checks for `invoke_embedding`). The models are the ones the binding selects, in order,
once each: its config's `model`, `fallback_models` and `models`, the runner's own model
selector fields (LangBot's `llm-model-selector`, `model-fallback-selector`), then the
resource policy's `allowed_model_uuids`. A selection is a model name or id; inactive and
unknown models are skipped. One query at run start resolves them all.
"""

import uuid
from dataclasses import dataclass, field

from django.db.models import Q

from runners.models import LLMModel, RunnerDescriptor
from runners.protocol import AgentBinding
from runners.providers.lookup import load_models

LLM_OPERATIONS = ("invoke", "stream", "count_tokens")
SELECTOR_TYPES = {"llm-model-selector", "select-llm-model", "model-fallback-selector",
                  "rerank-model-selector"}
# What LangBot's selectors store for "no model".
NO_MODEL = {"", "__none__", "__none"}


@dataclass(frozen=True)
class ModelGrants:
    """SDK `ModelResource` dicts in grant order, and the context window of the first chat
    model (the context's `runtime.metadata.model_context_window_tokens`)."""

    models: list[dict] = field(default_factory=list)
    context_window: int | None = None


NO_GRANTS = ModelGrants()


def as_model_id(value: str) -> str | None:
    """`value` in the form `str(model.pk)` has, if it is a UUID."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _selections(binding: AgentBinding, descriptor: RunnerDescriptor) -> list[str]:
    """The model names and ids (as `str(model.pk)`) the binding selects, in grant order, once
    each."""
    config = binding.runner_config
    values = [config.get("model"), *_listed(config.get("fallback_models")),
              *_listed(config.get("models"))]
    for item in descriptor.config_schema or []:
        if isinstance(item, dict) and item.get("type") in SELECTOR_TYPES:
            value = config.get(item.get("name"))
            if isinstance(value, dict):  # model-fallback-selector: {primary, fallbacks}
                values += [value.get("primary"), *_listed(value.get("fallbacks"))]
            else:
                values.append(value)
    values += binding.resource_policy.allowed_model_uuids or []
    chosen = (as_model_id(value) or value for value in values
              if isinstance(value, str) and value not in NO_MODEL)
    return list(dict.fromkeys(chosen))


def _operations(model: LLMModel, wanted: list[str]) -> list[str]:
    if model.model_type == LLMModel.Type.CHAT:
        return [op for op in LLM_OPERATIONS if op in wanted]
    if model.model_type == LLMModel.Type.EMBEDDING and "invoke" in wanted:
        return ["invoke"]
    if model.model_type == LLMModel.Type.RERANK and "rerank" in wanted:
        return ["rerank"]
    return []


async def model_grants(binding: AgentBinding, descriptor: RunnerDescriptor) -> ModelGrants:
    wanted = (descriptor.permissions or {}).get("models") or []
    if not any(op in (*LLM_OPERATIONS, "rerank") for op in wanted):
        return NO_GRANTS
    keys = _selections(binding, descriptor)
    if not keys:
        return NO_GRANTS
    ids = [key for key in keys if as_model_id(key)]
    found = {}
    if ids:
        selected = [model async for model in LLMModel.objects.filter(
            Q(name__in=keys) | Q(pk__in=ids), is_active=True).select_related("provider")]
    else:  # names only, the usual case: read through the models cache of every LLM run
        selected = await load_models(keys)
    for model in selected:
        found[model.name] = found[str(model.pk)] = model
    models = {}  # pk -> model, in selection order, once each
    for key in keys:
        if key in found:
            models.setdefault(found[key].pk, found[key])
    resources, window = [], None
    for model in models.values():
        operations = _operations(model, wanted)
        if not operations:
            continue
        resources.append({"model_id": str(model.pk), "model_type": model.model_type,
                          "provider": model.provider.name, "operations": operations})
        if window is None and model.model_type == LLMModel.Type.CHAT:
            window = model.context_window
    return ModelGrants(resources, window)
