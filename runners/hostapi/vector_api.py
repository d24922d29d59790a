"""LangBot's vector actions for plugins (`vector_upsert`, `vector_search`, `vector_delete`,
`vector_list`), in LangBot's shapes, over the calling plugin's own collections
(`runners.knowledge.collections`).

The collection's owner is the calling plugin as the runtime names it
(`caller_plugin_identity`, which LangHost's runtime sets from the plugin's own connection, and
the installation of the call's context, which any SDK runtime sends; they must agree):
a plugin cannot name another's collections, nor a knowledge base's vectors. Answers:
`vector_upsert` -> `{}`; `vector_search` -> `{"results": [{id, distance, score, metadata,
document}]}`; `vector_delete` -> `{"count": n}`; `vector_list` -> `{"items": [{id, document,
metadata}], "total": n}`. Bad arguments are refused `vector.bad_arguments`.
"""

from asgiref.sync import sync_to_async

from runners.hostapi import run_api
from runners.knowledge import collections
from runners.runtime.host_actions import HostError

ACTIONS = frozenset({"vector_upsert", "vector_search", "vector_delete", "vector_list"})


async def handle(action: str, data: dict, context: dict | None) -> dict:
    owner = await run_api.calling_plugin(data, context)
    if not isinstance(owner, str) or not owner:
        raise HostError("vector.no_caller", f"{action} must come from a plugin the runtime "
                                            "names")
    collection = data.get("collection_id")
    if not isinstance(collection, str) or not collection or len(collection) > 255:
        raise HostError("vector.bad_arguments", "collection_id must be a non-empty string of "
                                                "at most 255 characters")
    try:
        return await sync_to_async(_answer)(action, owner, collection, data)
    except collections.CollectionError as exc:
        raise HostError("vector.bad_arguments", f"{action}: {exc}") from None


def _answer(action: str, owner: str, collection: str, data: dict) -> dict:
    if action == "vector_upsert":
        collections.upsert(owner, collection, data.get("ids"), data.get("vectors"),
                           data.get("metadata"), data.get("documents"))
        return {}
    if action == "vector_search":
        return {"results": collections.search(
            owner, collection, data.get("query_vector"), data.get("top_k", 5),
            data.get("filters") or None, data.get("search_type") or "vector",
            data.get("query_text") or "", data.get("vector_weight"))}
    if action == "vector_delete":
        return {"count": collections.delete(owner, collection, data.get("file_ids"),
                                            data.get("filters"))}
    return collections.listed(owner, collection, data.get("filters") or None,
                              data.get("limit", 20), data.get("offset", 0))
