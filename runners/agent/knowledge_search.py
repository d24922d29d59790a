"""The built-in LLM agent's knowledge: its run's granted knowledge bases (`resources.
knowledge_bases`, operation `retrieve`), searched through the same retrieval service as every
door and runner.

By default (`auto`) the bases are searched with each message before the model answers and
what was found joins its system prompt; an agent type that says `tool` offers the model a
`search_knowledge(query, top_k?)` tool instead. Either way the search is recorded as a tool call of the run, its
embedding calls as the run's model calls, and every chunk the model was shown becomes a
citation of the reply (`message.provider_specific_fields.citations`: document, chunk, page,
score), which the pages show under it.
"""

from runners.knowledge import services
from runners.knowledge.models import KnowledgeBase
from runners.providers.calls import CallInfo
from runners.providers.errors import ProviderError

SEARCH_TOOL = "search_knowledge"
AUTO_CALL_ID = "knowledge-auto"
DEFAULT_TOP_K = 5
MAX_TOP_K = 20


class SearchError(ValueError):
    pass


class KnowledgeSearch:
    """The run's searchable bases, and the citations of what the model has been shown."""

    def __init__(self, bases: list[KnowledgeBase], call: CallInfo, automatic: bool):
        self.bases = bases
        self.call = call
        self.automatic = automatic
        self.citations: list[dict] = []

    @classmethod
    async def for_run(cls, context: dict, call: CallInfo) -> "KnowledgeSearch | None":
        grants = (context.get("resources") or {}).get("knowledge_bases") or []
        ids = [grant["kb_id"] for grant in grants
               if "retrieve" in (grant.get("operations") or [])]
        if not ids:
            return None
        found = {str(kb.pk): kb async for kb in KnowledgeBase.objects.filter(
            pk__in=ids).select_related("embedding_model")}
        bases = [found[kb_id] for kb_id in ids if kb_id in found]
        automatic = (context.get("config") or {}).get("knowledge_retrieval", "auto") == "auto"
        return cls(bases, call, automatic) if bases else None

    def tool(self) -> dict:
        names = ", ".join(base.name for base in self.bases)
        return {"name": SEARCH_TOOL,
                "description": f"Search the knowledge bases ({names}) for passages about a "
                               "question. Cite what you use as [n].",
                "parameters": {"type": "object", "required": ["query"], "properties": {
                    "query": {"type": "string", "description": "What to look for."},
                    "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K,
                              "description": f"Passages to return (default {DEFAULT_TOP_K})."},
                }}}

    async def search(self, query: str, top_k: int = DEFAULT_TOP_K) -> list[services.Hit]:
        """The best passages of all the bases, best first."""
        hits = []
        for base in self.bases:
            hits += await services.retrieve(base, query, top_k, call=self.call)
        return sorted(hits, key=lambda hit: -hit.score)[:top_k]

    def shown(self, hits: list[services.Hit]) -> str:
        """The passages as the model reads them, each numbered as its citation."""
        if not hits:
            return "Nothing in the knowledge bases matches."
        lines = []
        for hit in hits:
            citation = hit.citation()
            if citation not in self.citations:
                self.citations.append(citation)
            number = self.citations.index(citation) + 1
            page = f", page {citation['page']}" if "page" in citation else ""
            lines.append(f"[{number}] {hit.document_name}{page}:\n{hit.text}")
        return "\n\n".join(lines)

    async def answer(self, args: dict) -> tuple[dict, str]:
        """`(recorded result, what the model reads)` for a `search_knowledge` call; raises
        SearchError with what to tell the model."""
        asked = self.arguments(args)
        if asked is None:
            raise SearchError("search_knowledge needs `query`, a non-empty string")
        try:
            hits = await self.search(*asked)
        except ProviderError as exc:  # the model reads it and may answer without
            raise SearchError(f"the knowledge search failed: {exc}") from None
        return self.recorded(hits), self.shown(hits)

    @staticmethod
    def arguments(parameters: dict) -> tuple[str, int] | None:
        """`(query, top_k)` from the model's call, or None when they make no search."""
        query, top_k = parameters.get("query"), parameters.get("top_k", DEFAULT_TOP_K)
        if not isinstance(query, str) or not query.strip():
            return None
        if not isinstance(top_k, int) or isinstance(top_k, bool):
            top_k = DEFAULT_TOP_K
        return query, max(1, min(top_k, MAX_TOP_K))

    @staticmethod
    def recorded(hits: list[services.Hit]) -> dict:
        """A search's result as its tool call records it."""
        return {"results": [{"text": hit.text, "citation": hit.citation()} for hit in hits]}
