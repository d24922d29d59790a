"""The knowledge bases a run may use: its `resources.knowledge_bases`, frozen into its
authorization with its other grants.

A runner is granted knowledge bases only when its manifest asks for knowledge-base
operations (`list`, `retrieve`). The bases are the ones its binding's config names (LangHost's
`knowledge_bases`, and the runner's own knowledge-base selector fields), narrowed by the
resource policy's `allowed_kb_uuids` when it names any, and only those of the run's own
project: a base of another project is never granted.
"""

import uuid

from runners.catalogue.runner_config import KNOWLEDGE_BASE_SELECTORS, fields_of
from runners.knowledge.models import KnowledgeBase
from runners.models import RunnerDescriptor
from runners.protocol import AgentBinding

KB_OPERATIONS = ("list", "retrieve")


def _ids(value) -> list[str]:
    values = value if isinstance(value, list) else [value]
    found = []
    for item in values:
        try:
            found.append(str(uuid.UUID(str(item))))
        except ValueError:
            continue
    return found


def selected(binding: AgentBinding, descriptor: RunnerDescriptor) -> list[str]:
    """The knowledge base ids the binding selects, in order, once each."""
    config = binding.runner_config
    ids = _ids(config.get("knowledge_bases") or [])
    for name, field in fields_of(descriptor.config_schema).items():
        if field.get("type") in KNOWLEDGE_BASE_SELECTORS:
            ids += _ids(config.get(name) or [])
    allowed = binding.resource_policy.allowed_kb_uuids
    if allowed is not None:
        ids = [kb_id for kb_id in ids if kb_id in set(_ids(allowed))]
    return list(dict.fromkeys(ids))


async def knowledge_grants(binding: AgentBinding, descriptor: RunnerDescriptor,
                           project_id: str | None) -> list[dict]:
    wanted = [op for op in KB_OPERATIONS
              if op in ((descriptor.permissions or {}).get("knowledge_bases") or [])]
    ids = selected(binding, descriptor) if wanted and project_id else []
    if not ids:
        return []
    found = {str(kb.pk): kb async for kb in KnowledgeBase.objects.filter(
        pk__in=ids, project_id=project_id)}
    return [{"kb_id": kb_id, "kb_name": found[kb_id].name, "kb_type": "vector",
             "description": found[kb_id].description, "operations": wanted}
            for kb_id in ids if kb_id in found]
