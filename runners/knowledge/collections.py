"""Plugins' own vector collections, the SDK's `vector_upsert`, `vector_search`,
`vector_delete` and `vector_list`: each plugin's collections are its own (the owner is the
calling plugin, as the runtime names it), apart from every other plugin's and from the
knowledge bases (a vector space of their own).

An item is `(id, vector, metadata, document)`; a collection's vectors all have the
dimensions of its first. Search is by vector (the database's index), by the document's words
(`full_text`), or both fused by rank (`hybrid`, the vector side weighing `vector_weight`).
Filters select items by metadata, MongoDB-style as LangBot's stores take them: `{key: value}`,
`{key: {"$eq" | "$ne" | "$in" | "$nin" | "$gt" | "$gte" | "$lt" | "$lte": value}}`,
`{"$and" | "$or": [filters]}`; a filtered search is exact. Bad input raises
CollectionError, naming what is wrong.
"""

import json
import math

from django.db import transaction

from runners.knowledge import keywords, vectors
from runners.knowledge.models import PluginVector, partition_of

SPACE = "plugin"
MAX_ITEMS = 1000
MAX_DIMENSIONS = 4096
MAX_TOP_K = 100
MAX_DOCUMENT_CHARS = 100_000
MAX_METADATA_BYTES = 64 * 1024
SEARCH_TYPES = ("vector", "full_text", "hybrid")


class CollectionError(ValueError):
    pass


def _items(owner: str, collection: str):
    return PluginVector.objects.filter(owner=owner, collection=collection)


def _checked_vector(value, what: str) -> list[float]:
    if (not isinstance(value, list) or not value or len(value) > MAX_DIMENSIONS
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                       and math.isfinite(x) for x in value)):
        raise CollectionError(f"{what} must be a list of 1 to {MAX_DIMENSIONS} finite numbers")
    return [float(x) for x in value]


def _dimensions(owner: str, collection: str) -> int | None:
    return _items(owner, collection).values_list("dimensions", flat=True).first()


@transaction.atomic
def upsert(owner: str, collection: str, ids: list, vector_list: list,
           metadata: list | None = None, documents: list | None = None) -> int:
    """Add the items, replacing those of the same ids; how many were written."""
    if not isinstance(ids, list) or not isinstance(vector_list, list) or len(ids) != len(
            vector_list):
        raise CollectionError("ids and vectors must be lists of the same length")
    if len(ids) > MAX_ITEMS:
        raise CollectionError(f"at most {MAX_ITEMS} items a call")
    if len(set(map(str, ids))) != len(ids):
        raise CollectionError("ids must be unique")
    metadata = metadata if metadata is not None else [{}] * len(ids)
    documents = documents if documents is not None else [""] * len(ids)
    if len(metadata) != len(ids) or len(documents) != len(ids):
        raise CollectionError("metadata and documents, when given, have one entry per id")
    checked = [_checked_vector(vector, f"vectors[{n}]") for n, vector in enumerate(vector_list)]
    dimensions = _dimensions(owner, collection) or (len(checked[0]) if checked else 0)
    for n, (vector, meta, document) in enumerate(zip(checked, metadata, documents, strict=True)):
        if len(vector) != dimensions:
            raise CollectionError(f"vectors[{n}] has {len(vector)} dimensions; the collection "
                                  f"holds {dimensions}")
        if not isinstance(meta, dict) or len(json.dumps(meta, default=str)) > MAX_METADATA_BYTES:
            raise CollectionError(f"metadata[{n}] must be an object of at most "
                                  f"{MAX_METADATA_BYTES} bytes as JSON")
        if not isinstance(document, str) or len(document) > MAX_DOCUMENT_CHARS:
            raise CollectionError(f"documents[{n}] must be text of at most "
                                  f"{MAX_DOCUMENT_CHARS} characters")
    _remove(owner, collection, _items(owner, collection).filter(item_id__in=map(str, ids)))
    made = PluginVector.objects.bulk_create(
        PluginVector(owner=owner, collection=collection, item_id=str(item_id),
                     vector=vectors.pack(vector), dimensions=dimensions, document=document,
                     metadata=json.loads(json.dumps(meta, default=str)))
        for item_id, vector, meta, document in zip(ids, checked, metadata, documents,
                                                   strict=True))
    if any(item.pk is None for item in made):  # a database that returns no ids on insert
        made = list(_items(owner, collection).filter(item_id__in=map(str, ids)))
    partition = partition_of(owner, collection)
    vectors.add(SPACE, partition, dimensions, [(item.pk, item.vector) for item in made])
    keywords.add(SPACE, partition, [(item.pk, item.document) for item in made if item.document])
    return len(made)


def _remove(owner: str, collection: str, items) -> int:
    found = list(items.values_list("pk", "dimensions"))
    ids = [pk for pk, _ in found]
    for dimensions in {dims for _, dims in found}:
        vectors.remove(SPACE, dimensions, [pk for pk, dims in found if dims == dimensions])
    keywords.remove(SPACE, ids)
    PluginVector.objects.filter(pk__in=ids).delete()
    return len(ids)


def matches(metadata: dict, where: dict) -> bool:
    """Whether an item's metadata passes a filter (see the module's doc)."""
    if not isinstance(where, dict):
        raise CollectionError("a filter must be an object")
    for key, condition in where.items():
        if key in ("$and", "$or"):
            if not isinstance(condition, list):
                raise CollectionError(f"{key} takes a list of filters")
            passed = [matches(metadata, part) for part in condition]
            if not (all(passed) if key == "$and" else any(passed)):
                return False
        elif isinstance(condition, dict):
            if not all(_compare(metadata.get(key), op, value) for op, value in condition.items()):
                return False
        elif metadata.get(key) != condition:
            return False
    return True


def _compare(actual, op: str, value) -> bool:
    if op in ("$in", "$nin"):
        if not isinstance(value, list):
            raise CollectionError(f"{op} takes a list")
        return (actual in value) == (op == "$in")
    if op == "$eq":
        return actual == value
    if op == "$ne":
        return actual != value
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            return {"$gt": actual > value, "$gte": actual >= value, "$lt": actual < value,
                    "$lte": actual <= value}[op] if actual is not None else False
        except TypeError:
            return False
    raise CollectionError(f"unknown filter operator {op!r}")


def _filtered(owner: str, collection: str, where: dict | None) -> list[PluginVector]:
    return [item for item in _items(owner, collection).iterator(chunk_size=2000)
            if not where or matches(item.metadata, where)]


@transaction.atomic
def delete(owner: str, collection: str, file_ids: list | None = None,
           filters: dict | None = None) -> int:
    """Remove the items whose metadata's `file_id` is one of `file_ids`, and those `filters`
    select (`{}`: every item); how many went."""
    if file_ids is None and filters is None:
        raise CollectionError("vector_delete needs file_ids or filters ({} for every item)")
    if file_ids is not None and not isinstance(file_ids, list):
        raise CollectionError("file_ids must be a list")
    wanted = {str(file_id) for file_id in file_ids or []}
    doomed = [item.pk for item in _items(owner, collection).iterator(chunk_size=2000)
              if str(item.metadata.get("file_id")) in wanted
              or (filters is not None and matches(item.metadata, filters))]
    return _remove(owner, collection, PluginVector.objects.filter(pk__in=doomed))


def listed(owner: str, collection: str, filters: dict | None = None, limit: int = 20,
           offset: int = 0) -> dict:
    """A page of the items `filters` select, in id order, and how many there are."""
    if not isinstance(limit, int) or not isinstance(offset, int) or limit < 1 or offset < 0:
        raise CollectionError("limit must be a positive integer and offset one of 0 or more")
    items = _filtered(owner, collection, filters)
    return {"items": [{"id": item.item_id, "document": item.document, "metadata": item.metadata}
                      for item in items[offset:offset + min(limit, MAX_ITEMS)]],
            "total": len(items)}


def search(owner: str, collection: str, query_vector: list, top_k: int = 5,
           filters: dict | None = None, search_type: str = "vector", query_text: str = "",
           vector_weight: float | None = None) -> list[dict]:
    """The items nearest the query, best first: `{id, distance, score, metadata, document}`
    (distance: cosine, lower is nearer; score: what ordered them, higher is better)."""
    if search_type not in SEARCH_TYPES:
        raise CollectionError(f"search_type must be one of {', '.join(SEARCH_TYPES)}")
    if not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
        raise CollectionError(f"top_k must be 1 to {MAX_TOP_K}")
    weight = 0.5 if vector_weight is None else vector_weight
    if not isinstance(weight, (int, float)) or not 0 <= weight <= 1:
        raise CollectionError("vector_weight must be 0 to 1")
    query = _checked_vector(query_vector, "query_vector") if search_type != "full_text" else []
    dimensions = _dimensions(owner, collection)
    if dimensions is None:
        return []
    if query and len(query) != dimensions:
        raise CollectionError(f"query_vector has {len(query)} dimensions; the collection "
                              f"holds {dimensions}")
    depth = top_k * 3 if search_type == "hybrid" else top_k
    nearest = _nearest(owner, collection, dimensions, query, depth, filters) if query else []
    matched = []
    if search_type != "vector" and isinstance(query_text, str) and query_text.strip():
        matched = keywords.matching(SPACE, (owner, collection), query_text, depth * 4)
        if filters:
            allowed = {item.pk for item in _filtered(owner, collection, filters)}
            matched = [hit for hit in matched if hit[0] in allowed]
    if search_type == "vector":
        ranking = [(pk, 1.0 - distance) for pk, distance in nearest]
    elif search_type == "full_text":
        ranking = matched[:top_k]
    else:
        ranking = _weighted_fusion(nearest, matched[:depth], weight, top_k)
    return _answers(ranking, dict(nearest), query)


def _nearest(owner, collection, dimensions, query, k, filters) -> list[tuple[int, float]]:
    if filters:
        scored = [(item.pk, vectors.cosine_distance(query, vectors.unpack(bytes(item.vector))))
                  for item in _filtered(owner, collection, filters)]
        return sorted(scored, key=lambda hit: hit[1])[:k]
    return vectors.nearest(
        SPACE, partition_of(owner, collection), dimensions, query, k,
        lambda: _items(owner, collection).values_list("pk", "vector").iterator(chunk_size=2000))


def _weighted_fusion(nearest, matched, weight: float, k: int) -> list[tuple[int, float]]:
    scores: dict[int, float] = {}
    for ranking, share in ((nearest, weight), (matched, 1.0 - weight)):
        for rank, (pk, _) in enumerate(ranking, start=1):
            scores[pk] = scores.get(pk, 0.0) + share / (60 + rank)
    return sorted(scores.items(), key=lambda item: -item[1])[:k]


def _answers(ranking, distances: dict, query: list[float]) -> list[dict]:
    items = PluginVector.objects.in_bulk([pk for pk, _ in ranking])
    answers = []
    for pk, score in ranking:
        item = items.get(pk)
        if item is None:
            continue
        distance = distances.get(pk)
        if distance is None:
            distance = (vectors.cosine_distance(query, vectors.unpack(bytes(item.vector)))
                        if query else 1.0)
        answers.append({"id": item.item_id, "distance": distance, "score": score,
                        "metadata": item.metadata, "document": item.document})
    return answers
