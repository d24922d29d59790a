"""Keyset pages of a ledger list, newest first, walked by cursor (`?cursor=`): each page is
`id < cursor ORDER BY id DESC LIMIT n` on an index, so it costs the same at any depth and
any ledger size, is never counted, and walking it while rows are added returns every row
once, in order (new rows land before the first page, behind `previous`).

A list may be the union of a few querysets (a user's runs: those they started, those of each
project they own), each walked on its own index and merged here — cheaper than one OR, which
no single index serves.
"""

import base64
import binascii
import heapq
from urllib.parse import urlencode

from rest_framework.response import Response

from langhost.api import BadInput

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


def _encode(direction: str, pk: int) -> str:
    return base64.urlsafe_b64encode(f"{direction}{pk}".encode()).decode().rstrip("=")


def _decode(cursor: str) -> tuple[str, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        direction, pk = raw[0], int(raw[1:])
    except (binascii.Error, UnicodeDecodeError, ValueError, IndexError):
        raise BadInput("cursor is not one this list gave.", field="cursor") from None
    if direction not in "ba" or not 0 <= pk < 2**63:
        raise BadInput("cursor is not one this list gave.", field="cursor")
    return direction, pk


def page_size(request) -> int:
    raw = request.query_params.get("page_size")
    if raw in (None, ""):
        return DEFAULT_PAGE_SIZE
    try:
        size = int(raw)
    except ValueError:
        raise BadInput("page_size must be a whole number.", field="page_size") from None
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise BadInput(f"page_size must be 1 to {MAX_PAGE_SIZE}.", field="page_size")
    return size


class KeysetPage:
    """One page of `querysets` (their union), newest first, with links to its neighbours."""

    def __init__(self, querysets: list, request):
        if "page" in request.query_params:
            raise BadInput("This list is paged by cursor: follow pagination.next.",
                           field="page")
        self.request = request
        self.size = page_size(request)
        cursor = request.query_params.get("cursor")
        direction, pk = _decode(cursor) if cursor else ("b", None)
        if direction == "b":
            rows = self._merged([qs if pk is None else qs.filter(pk__lt=pk)
                                 for qs in querysets], newest_first=True)
            self.rows = rows[:self.size]
            self.has_next = len(rows) > self.size
            self.has_prev = bool(self.rows) and self._any(querysets, pk__gt=self.rows[0].pk)
        else:
            rows = self._merged([qs.filter(pk__gt=pk) for qs in querysets], newest_first=False)
            self.rows = list(reversed(rows[:self.size]))
            self.has_prev = len(rows) > self.size
            self.has_next = bool(self.rows) and self._any(querysets, pk__lt=self.rows[-1].pk)

    def _merged(self, querysets: list, newest_first: bool) -> list:
        """The first `size + 1` rows of the union, each queryset asked for as many."""
        order = "-pk" if newest_first else "pk"
        lists = [list(qs.order_by(order)[:self.size + 1]) for qs in querysets]
        merged, seen = [], set()
        for row in heapq.merge(*lists, key=lambda row: row.pk, reverse=newest_first):
            if row.pk not in seen:
                seen.add(row.pk)
                merged.append(row)
        return merged[:self.size + 1]

    @staticmethod
    def _any(querysets: list, **beyond) -> bool:
        return any(qs.filter(**beyond).order_by().exists() for qs in querysets)

    def _link(self, direction: str, pk: int) -> str:
        query = {key: value for key, value in self.request.query_params.items()
                 if key != "cursor"}
        query["cursor"] = _encode(direction, pk)
        return self.request.build_absolute_uri(self.request.path) + "?" + urlencode(query)

    def response(self, data) -> Response:
        return Response({"data": data, "pagination": {
            "page_size": self.size, "has_next": self.has_next, "has_prev": self.has_prev,
            "next": self._link("b", self.rows[-1].pk) if self.has_next else None,
            "previous": self._link("a", self.rows[0].pk) if self.has_prev else None,
        }})


def response_schema(schema: dict) -> dict:
    """The OpenAPI schema of a keyset page of `schema` items."""
    return {"type": "object", "properties": {
        "data": schema,
        "pagination": {"type": "object", "properties": {
            "page_size": {"type": "integer"}, "has_next": {"type": "boolean"},
            "has_prev": {"type": "boolean"},
            "next": {"type": "string", "nullable": True, "format": "uri"},
            "previous": {"type": "string", "nullable": True, "format": "uri"}}}}}
