"""Keyset pages of a ledger list, walked by cursor (`?cursor=`): each page is
`key < cursor ORDER BY key DESC LIMIT n` (newest first; `>` and ascending for a list read
oldest first) on an index, so it costs the same at any depth and any ledger size, is never
counted, and walking it while rows are added returns every row once, in order (new rows land
before the first page of a newest-first list, behind `previous`; after the last page of an
oldest-first one, behind `next`).

The key is one unique column, or several ending in one (a conversation's last activity, then
its id): compared as a tuple.

A list may be the union of a few querysets (a user's runs: those they started, those of each
project they own), each walked on its own index and merged here — cheaper than one OR, which
no single index serves.
"""

import base64
import binascii
import datetime
import heapq
import json
from urllib.parse import urlencode

from django.core.exceptions import ValidationError
from django.db.models import Q
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response

from langhost.base.api import BadInput

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


def _not_ours() -> BadInput:
    return BadInput("cursor is not one this list gave.", field="cursor")


def _encode(direction: str, values: tuple) -> str:
    raw = json.dumps([direction, *(value.isoformat() if isinstance(value, datetime.datetime)
                                   else value for value in values)], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode(cursor: str, fields: list) -> tuple[str, tuple]:
    """The direction and key values of a cursor `_encode` made, each as its field reads it."""
    try:
        direction, *raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if direction not in ("a", "b") or len(raw) != len(fields):
            raise _not_ours()
        values = tuple(field.to_python(value) for field, value in zip(fields, raw, strict=True))
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError, OverflowError,
            ValidationError):  # OverflowError: a forged Infinity for an integer key
        raise _not_ours() from None
    if any(value is None or (isinstance(value, int) and not 0 <= value < 2**63)
           for value in values):
        raise _not_ours()
    return direction, values


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
    """One page of `querysets` (their union) ordered by `key` (a unique column, or a tuple of
    columns ending in one), newest first (or oldest first), with links to its neighbours.
    `total`, when given, is the list's size, for a list cheap to count (one run's events)."""

    def __init__(self, querysets: list, request, *, key: str | tuple = "pk",
                 newest_first: bool = True, total=None):
        if "page" in request.query_params:
            raise BadInput("This list is paged by cursor: follow pagination.next.",
                           field="page")
        self.request, self.total = request, total
        self.keys = (key,) if isinstance(key, str) else tuple(key)
        self.size = page_size(request)
        meta = querysets[0].model._meta
        fields = [meta.pk if name == "pk" else meta.get_field(name) for name in self.keys]
        cursor = request.query_params.get("cursor")
        direction, values = _decode(cursor, fields) if cursor else ("b", None)
        # "b": the rows beyond the cursor in the list's order (next); "a": those ahead of it.
        onward, back = ("lt", "gt") if newest_first else ("gt", "lt")
        if direction == "b":
            rows = self._merged([qs if values is None else qs.filter(self._beyond(values, onward))
                                 for qs in querysets], descending=newest_first)
            self.rows = rows[:self.size]
            self.has_next = len(rows) > self.size
            self.has_prev = bool(self.rows) and self._any(
                querysets, self._beyond(self._key(self.rows[0]), back))
        else:
            rows = self._merged([qs.filter(self._beyond(values, back)) for qs in querysets],
                                descending=not newest_first)
            self.rows = list(reversed(rows[:self.size]))
            self.has_prev = len(rows) > self.size
            self.has_next = bool(self.rows) and self._any(
                querysets, self._beyond(self._key(self.rows[-1]), onward))

    def _key(self, row) -> tuple:
        return tuple(row.pk if name == "pk" else getattr(row, name) for name in self.keys)

    def _beyond(self, values: tuple, lookup: str) -> Q:
        """The rows past `values` (`lt` or `gt`), the keys compared as a tuple."""
        beyond, equal = Q(), {}
        for name, value in zip(self.keys, values, strict=True):
            beyond |= Q(**equal, **{f"{name}__{lookup}": value})
            equal[name] = value
        return beyond

    def _merged(self, querysets: list, descending: bool) -> list:
        """The first `size + 1` rows of the union, each queryset asked for as many."""
        order = [f"-{name}" if descending else name for name in self.keys]
        lists = [list(qs.order_by(*order)[:self.size + 1]) for qs in querysets]
        merged, seen = [], set()
        for row in heapq.merge(*lists, key=self._key, reverse=descending):
            if row.pk not in seen:
                seen.add(row.pk)
                merged.append(row)
        return merged[:self.size + 1]

    @staticmethod
    def _any(querysets: list, beyond: Q) -> bool:
        return any(qs.filter(beyond).order_by().exists() for qs in querysets)

    def _link(self, direction: str, values: tuple) -> str:
        query = {name: given for name, given in self.request.query_params.items()
                 if name != "cursor"}
        query["cursor"] = _encode(direction, values)
        return self.request.build_absolute_uri(self.request.path) + "?" + urlencode(query)

    def response(self, data) -> Response:
        pagination = {
            "page_size": self.size, "has_next": self.has_next, "has_prev": self.has_prev,
            "next": self._link("b", self._key(self.rows[-1])) if self.has_next else None,
            "previous": self._link("a", self._key(self.rows[0])) if self.has_prev else None,
        }
        if self.total is not None:
            pagination["total"] = self.total()
        return Response({"data": data, "pagination": pagination})


class PaginationSerializer(serializers.Serializer):
    """Where a keyset page is in its list (`KeysetPage.response`)."""

    page_size = serializers.IntegerField()
    has_next = serializers.BooleanField()
    has_prev = serializers.BooleanField()
    total = serializers.IntegerField(required=False, help_text="Only where counting is cheap.")
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)


def page_serializer(item: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """The schema of a keyset page of `item`s: `{data: [item], pagination}`."""
    name = item.__name__.removesuffix("Serializer")
    page = type(f"{name}PageSerializer", (serializers.Serializer,), {
        "__doc__": f"A page of {name} items and where it is in its list.",
        "data": item(many=True), "pagination": PaginationSerializer()})
    return extend_schema_serializer(many=False)(page)  # one page, even for a `list` action
