"""A provider's own models, listed from its API (`calls.upstream_models`) and imported as LLM
models."""

from django.db import transaction

from runners.models import LLMModel, ModelProvider
from runners.providers.prices import prefill


def with_imported(provider: ModelProvider, listed: list[dict]) -> list[dict]:
    """The listed models, each marked `imported` when the provider has an LLM model of it."""
    have = set(provider.models.values_list("upstream_model", flat=True))
    return [{**model, "imported": model["id"] in have} for model in listed]


@transaction.atomic
def import_models(provider: ModelProvider, listed: list[dict],
                  ids: list[str] | None = None) -> dict:
    """An LLM model for each listed model named in `ids` (None: every one) that the provider
    has none of yet: named by its upstream id (`<id>@<provider>` when another provider's model
    has that name), an embedding model when its id says so, its prices and context window
    from genai-prices (the window the provider states winning). `{created, skipped}`: the new
    models' names, and the ids left out (imported before, or not listed)."""
    by_id = {model["id"]: model for model in listed}
    wanted = list(by_id) if ids is None else list(dict.fromkeys(ids))
    have = set(provider.models.values_list("upstream_model", flat=True))
    taken = set(LLMModel.objects.values_list("name", flat=True))
    created, skipped = [], []
    for upstream in wanted:
        if upstream not in by_id or upstream in have:
            skipped.append(upstream)
            continue
        name = upstream if upstream not in taken else f"{upstream}@{provider.name}"[:200]
        model = LLMModel(name=name, provider=provider, upstream_model=upstream,
                         model_type=LLMModel.Type.EMBEDDING if "embed" in upstream.lower()
                         else LLMModel.Type.CHAT)
        prefill(model)
        if by_id[upstream].get("context_window"):
            model.context_window = by_id[upstream]["context_window"]
        model.save()
        taken.add(name)
        created.append(name)
    return {"created": created, "skipped": skipped}
