"""Knowledge bases kept by a plugin's knowledge engine (LangBot's `KnowledgeEngine`), as
LangBot keeps them: a document uploaded to the base goes to the engine's `ingest` (which reads
the file from the host, `get_knowledge_file_stream`, and stores what it makes where it likes:
the host's vectors, its storage, a service of its own), retrieval asks the engine's
`retrieve`, and the engine hears when a base or a document is made or removed. The base's
`engine_settings` (its creation settings) and `retrieval_settings` follow the engine's forms;
secret fields are sealed as a runner's config is, and opened only for the engine."""

from asgiref.sync import sync_to_async

from runners.catalogue import runner_config
from runners.knowledge.models import KnowledgeBase, KnowledgeDocument
from runners.models import PluginInstallation
from runners.runtime.errors import RuntimeLinkError
from runners.runtime.host_process import host_process

INGEST_TIMEOUT_SECONDS = 300.0
# The fields whose secrets are sealed (`manage.py rotate_secrets` re-encrypts them).
SEALED_FIELDS = ((KnowledgeBase, "engine_settings"), (KnowledgeBase, "retrieval_settings"))
CALL_TIMEOUT_SECONDS = 30.0


class EngineError(Exception):
    """The engine failed, timed out, or cannot be reached; the message says which."""


def available_sync(plugin_id: str) -> dict | None:
    """The engine of an enabled plugin ("author/name"), as the runtime last listed it."""
    author, _, name = plugin_id.partition("/")
    installation = PluginInstallation.objects.filter(author=author, name=name,
                                                     enabled=True).first()
    return installation.knowledge_engine if installation else None


def checked_settings(plugin_id: str, engine_settings, retrieval_settings,
                     previous: KnowledgeBase | None) -> tuple[dict, dict]:
    """The settings as stored (secret fields sealed, kept when not sent again); ValueError
    with `{field: message}` when the engine is unknown or a setting is not in its forms."""
    engine = available_sync(plugin_id)
    if engine is None:
        raise ValueError({"engine": f"No enabled plugin with a knowledge engine is "
                                    f"'{plugin_id}' (GET /plugins: `knowledge_engine`)."})
    sealed = []
    for field, value, schema in (("engine_settings", engine_settings, engine["creation_schema"]),
                                 ("retrieval_settings", retrieval_settings,
                                  engine["retrieval_schema"])):
        try:
            runner_config.check(value or {}, schema, plugin_id)
        except runner_config.ConfigError as exc:
            raise ValueError({field: exc.errors}) from None
        sealed.append(runner_config.sealed(value or {}, schema,
                                           getattr(previous, field, None) if previous else None))
    return sealed[0], sealed[1]


async def _call(engine: str, action: str, data: dict, timeout: float) -> dict:
    gateway = host_process().gateway_binding
    if gateway is None:
        raise EngineError("this process reaches no plugin runtime")
    try:
        answer = await gateway.engine_call(engine, action, data, timeout)
    except (RuntimeLinkError, RuntimeError, TimeoutError) as exc:
        raise EngineError(f"knowledge engine {engine}: {exc}") from None
    if not isinstance(answer, dict):
        raise EngineError(f"knowledge engine {engine} answered {action} with no object")
    return answer


async def ingest(document: KnowledgeDocument) -> int:
    """Hand the document to its base's engine; the chunks it says it made. EngineError with
    the engine's reason when it failed."""
    knowledge_base = document.knowledge_base
    base_id = str(knowledge_base.pk)
    context = {
        "file_object": {"storage_path": document.file.name, "metadata": {
            "filename": document.name, "file_size": document.size,
            "mime_type": document.mime_type, "document_id": str(document.pk),
            "knowledge_base_id": base_id, "upload_time": document.created_at.isoformat()}},
        "knowledge_base_id": base_id, "collection_id": base_id,
        "creation_settings": creation_settings(knowledge_base)}
    result = await _call(knowledge_base.engine, "rag_ingest_document", {"context": context},
                         INGEST_TIMEOUT_SECONDS)
    if result.get("status") != "completed":
        raise EngineError(result.get("error_message") or
                          f"the engine answered {result.get('status')!r}")
    made = result.get("chunks_created")
    return made if isinstance(made, int) else 0


async def retrieve(knowledge_base: KnowledgeBase, query: str, k: int) -> list[dict]:
    """The engine's results for `query` (LangBot's `RetrievalResultEntry`s), best first."""
    engine = await sync_to_async(available_sync)(knowledge_base.engine)
    if engine is None:
        raise EngineError(f"knowledge engine {knowledge_base.engine} is not available")
    base_id = str(knowledge_base.pk)
    answer = await _call(knowledge_base.engine, "retrieve_knowledge", {
        "retriever_name": engine["name"], "retrieval_context": {
            "query": query, "knowledge_base_id": base_id, "collection_id": base_id,
            "retrieval_settings": {"top_k": k, **runner_config.opened(
                knowledge_base.retrieval_settings or {})},
            "creation_settings": creation_settings(knowledge_base), "filters": {}}},
        CALL_TIMEOUT_SECONDS)
    return [entry for entry in answer.get("results") or [] if isinstance(entry, dict)][:k]


async def created(engine: str, base_id: str, creation_settings: dict) -> None:
    await _call(engine, "rag_on_kb_create", {"kb_id": base_id, "config": creation_settings},
                CALL_TIMEOUT_SECONDS)


async def deleted(engine: str, base_id: str) -> None:
    await _call(engine, "rag_on_kb_delete", {"kb_id": base_id}, CALL_TIMEOUT_SECONDS)


async def document_deleted(engine: str, base_id: str, document_id: str) -> None:
    await _call(engine, "rag_delete_document", {"kb_id": base_id, "document_id": document_id},
                CALL_TIMEOUT_SECONDS)


def creation_settings(knowledge_base: KnowledgeBase) -> dict:
    """The base's creation settings as its engine reads them (secrets opened)."""
    return runner_config.opened(knowledge_base.engine_settings or {})
