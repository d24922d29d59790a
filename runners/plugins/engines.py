"""A plugin's `KnowledgeEngine` (LangBot 4.x: a knowledge base kept by a plugin), as the
runtime lists it: its name, label and description, its capabilities (`doc_ingestion`: it
takes documents) and the forms of its creation and retrieval settings (`creation_schema`,
`retrieval_schema`, in LangBot's form shapes). The runtime runs a plugin's first engine."""

KIND = "KnowledgeEngine"
DOC_INGESTION = "doc_ingestion"


def _engine_component(plugin: dict) -> dict | None:
    for component in plugin.get("components") or []:
        manifest = (component.get("manifest") or {}).get("manifest") or {}
        if manifest.get("kind") == KIND:
            return manifest
    return None


def has_engine(plugin: dict) -> bool:
    """Whether a plugin the runtime lists (`list_plugins`) has a knowledge engine."""
    return _engine_component(plugin) is not None


def declared(plugin: dict, capabilities: list | None) -> dict | None:
    """The engine of a plugin the runtime lists, with the `capabilities` the runtime said
    (`list_knowledge_engines`); None when it has none."""
    manifest = _engine_component(plugin)
    if manifest is None:
        return None
    metadata, spec = manifest.get("metadata") or {}, manifest.get("spec") or {}
    return {"name": metadata.get("name") or "", "label": metadata.get("label") or {},
            "description": metadata.get("description") or {},
            "capabilities": capabilities if capabilities is not None else [DOC_INGESTION],
            "creation_schema": spec.get("creation_schema") or [],
            "retrieval_schema": spec.get("retrieval_schema") or []}
