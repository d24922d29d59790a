"""LangBot's knowledge actions, answered in LangBot's shapes, for the bases granted to the run.

`list_knowledge_bases` / `list_pipeline_knowledge_bases` -> `{"knowledge_bases": [{uuid, name,
type}]}` (the run's granted ones); `retrieve_knowledge_base` / `retrieve_knowledge`
`{kb_id, query_text, top_k, filters?}` -> `{"results": [RetrievalResultEntry]}`: `{id, content:
[text element], metadata: {document_id, document_name, storage_path, chunk, page?}, distance,
score}`, best first (`filters`: on that metadata, MongoDB-style as for vectors); `document_file` reads a granted document by its `storage_path` for
`get_knowledge_file_stream` and `invoke_parser`. A base not granted to the run for the operation is refused `kb.not_granted` here, by
the host, whatever the plugin's SDK checked.

A call names its run and is the run's plugin's by every name it comes with (the SDK's runtime
forwards these actions with the calling plugin's installation in their context, LangHost's
own runtime names the caller too: `run_api.authorize`); it is refused when a name is another
plugin's or unknown, or the run is no longer active.
"""

from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from ledger.models import AgentRun, RunStatus
from runners.hostapi import run_api
from runners.knowledge import collections, services
from runners.knowledge.models import KnowledgeBase, KnowledgeDocument
from runners.providers import load_calls_off_the_loop
from runners.providers.errors import ProviderError
from runners.runtime.host_actions import HostError
from runners.runtime.host_process import host_process

if TYPE_CHECKING:
    from runners.providers.calls import CallInfo

LIST_ACTIONS = frozenset({"list_knowledge_bases", "list_pipeline_knowledge_bases"})
RETRIEVE_ACTIONS = frozenset({"retrieve_knowledge_base", "retrieve_knowledge"})
ACTIONS = LIST_ACTIONS | RETRIEVE_ACTIONS
MAX_TOP_K = 50
# A filtered retrieval looks at this many times its top k before filtering.
FILTER_POOL = 4


def _granted(auth: dict, operation: str) -> list[dict]:
    return [grant for grant in (auth.get("resources") or {}).get("knowledge_bases") or []
            if operation in (grant.get("operations") or [])]


async def _authorize(action: str, data: dict, context: dict | None) -> tuple[AgentRun, dict]:
    """The run, checked as every in-run API checks it (`run_api.authorize`), and active."""
    run, auth = await run_api.authorize(action, data, context)
    if run.status != RunStatus.RUNNING:
        raise HostError("run.not_active", f"run {run.run_id} is {run.status}; {action} needs "
                                          "an active run")
    return run, auth


async def _call_of(run: AgentRun, auth: dict) -> "CallInfo":
    """The run's embedding and rerank calls: recorded on the run, within its deadline."""
    handle = host_process().handle(run.run_id)
    calls = await load_calls_off_the_loop()
    return calls.CallInfo(
        run_id=run.run_id, agent_id=run.agent_id, project_id=run.project_id,
        caller=auth.get("plugin_identity") or "", journal=handle.journal_model_call if handle else None,
        deadline=run.deadline_at.timestamp() if run.deadline_at else None)


async def document_file(action: str, data: dict, context: dict | None) -> tuple[bytes, str]:
    """The file of a document (`storage_path`, as retrieval names it), as `(content,
    extension)`: in a run, of a knowledge base granted to it for retrieve; outside one, of a
    base the calling plugin's knowledge engine keeps (its ingestion reads it)."""
    path = data.get("storage_path")
    if data.get("run_id"):
        run, auth = await _authorize(action, data, context)
        documents = KnowledgeDocument.objects.filter(knowledge_base_id__in=[
            grant["kb_id"] for grant in _granted(auth, "retrieve")])
        refused = f"granted to run {run.run_id}"
    else:
        engine = await run_api.calling_plugin(data, context)
        documents = KnowledgeDocument.objects.filter(knowledge_base__engine=engine or None)
        refused = f"kept by {engine or 'an unnamed caller'}'s knowledge engine"
    document = await documents.filter(file=path).afirst() if isinstance(path, str) and path \
        else None
    if document is None:
        raise HostError("kb.not_granted", f"{path!r} is no document of a knowledge base "
                                          f"{refused}")
    return await services.read_file(document), PurePosixPath(document.name).suffix


async def handle(action: str, data: dict, context: dict | None) -> dict:
    """Answer one knowledge action, or raise HostError."""
    run, auth = await _authorize(action, data, context)
    if action in LIST_ACTIONS:
        return {"knowledge_bases": [{"uuid": grant["kb_id"], "name": grant.get("kb_name"),
                                     "description": grant.get("description") or "",
                                     "type": grant.get("kb_type")}
                                    for grant in _granted(auth, "list")]}
    kb_id = str(data.get("kb_id") or "")
    if kb_id not in {grant["kb_id"] for grant in _granted(auth, "retrieve")}:
        raise HostError("kb.not_granted",
                        f"knowledge base {kb_id!r} is not granted to run {run.run_id} for "
                        "retrieve")
    knowledge_base = await KnowledgeBase.objects.select_related(
        "embedding_model").filter(pk=kb_id).afirst()
    if knowledge_base is None:
        raise HostError("kb.not_found", f"knowledge base {kb_id!r} no longer exists")
    query = data.get("query_text")
    if not isinstance(query, str):
        raise HostError("kb.bad_arguments", "retrieve needs `query_text`, a string")
    top_k = data.get("top_k")
    top_k = min(top_k, MAX_TOP_K) if isinstance(top_k, int) and top_k > 0 else None
    filters = data.get("filters") or {}
    if not isinstance(filters, dict):
        raise HostError("kb.bad_arguments", "filters must be an object")
    wanted = top_k or knowledge_base.top_k
    try:
        # Filtered: more candidates, then those whose metadata passes.
        hits = await services.retrieve(knowledge_base, query,
                                       min(wanted * FILTER_POOL, MAX_TOP_K) if filters else top_k,
                                       call=await _call_of(run, auth))
    except ProviderError as exc:
        raise HostError("model.unavailable", str(exc), retryable=exc.retryable) from None
    results = []
    for hit in hits:
        metadata = {"document_id": hit.document_id, "document_name": hit.document_name,
                    "storage_path": hit.storage_path, "chunk": hit.position, **hit.metadata}
        try:
            if filters and not collections.matches(metadata, filters):
                continue
        except collections.CollectionError as exc:
            raise HostError("kb.bad_arguments", f"filters: {exc}") from None
        results.append({"id": str(hit.chunk_id), "content": [{"type": "text", "text": hit.text}],
                        "metadata": metadata, "distance": hit.distance, "score": hit.score})
    return {"results": results[:wanted]}
