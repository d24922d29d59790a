"""Models by the names agent types give them."""

import time
from collections.abc import Iterable

from runners.models import AgentType, LLMModel


def model_names(agent_type: AgentType) -> list[str]:
    """The type's primary model, then its fallbacks: the order calls try them."""
    fallbacks = agent_type.fallback_models if isinstance(agent_type.fallback_models, list) else []
    return _distinct([agent_type.primary_model, *fallbacks])


def _distinct(names: Iterable) -> list[str]:
    # The admin stores free JSON: anything but a non-empty string names no model.
    return list(dict.fromkeys(name for name in names if isinstance(name, str) and name))


def unknown_models(names: Iterable[str], known: set[str] | None = None) -> list[str]:
    """The names no LLMModel has, in order, once each (`known`: all model names, if the
    caller has them already)."""
    names = _distinct(names)
    if known is None:
        known = set(LLMModel.objects.filter(name__in=names).values_list("name", flat=True))
    return [name for name in names if name not in known]


# Models are read for every LLM run: a short-lived cache spares the run a round trip before
# its first token. Changes (admin, API) show within the TTL.
CACHE_SECONDS = 2.0
_cache: dict[tuple[str, ...], tuple[float, list[LLMModel]]] = {}


async def load_models(names: Iterable[str]) -> list[LLMModel]:
    """The active models of these names, providers loaded, in the order given; unknown and
    inactive names are skipped (a fallback chain tries what exists)."""
    names = tuple(_distinct(names))
    cached = _cache.get(names)
    if cached and cached[0] > time.monotonic():
        return cached[1]
    found = {model.name: model async for model in LLMModel.objects.filter(
        name__in=names, is_active=True).select_related("provider")}
    models = [found[name] for name in names if name in found]
    _cache[names] = (time.monotonic() + CACHE_SECONDS, models)
    return models


def forget_models() -> None:
    """A model or provider changed in this process: the next run reads them again."""
    _cache.clear()
