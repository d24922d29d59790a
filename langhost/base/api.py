"""API conventions shared by every app: the list envelope and JSON errors."""

import math
import sys

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from django.views.defaults import bad_request as django_bad_request
from django.views.defaults import page_not_found
from django.views.defaults import server_error as django_server_error
from rest_framework import exceptions, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response
from rest_framework.routers import SimpleRouter
from rest_framework.views import exception_handler as drf_exception_handler

from langhost.base.parsers import upload_limit_text

# A UUID in a URL: anything else there is no route (404), not a failed lookup.
UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


class OptionalSlashRouter(SimpleRouter):
    """Routes that answer with and without a trailing slash (`/api/v1/projects[/]`).

    `SimpleRouter(trailing_slash="/?")` does not do this: DRF turns any truthy value into "/".
    A non-capturing group (rather than a bare `/?`) keeps the OpenAPI paths slash-free.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.trailing_slash = "(?:/)?"


class EnvelopePagination(PageNumberPagination):
    """`{"data": [...], "pagination": {...}}` with `?page=` and `?page_size=` (max 100)."""

    page_size_query_param = "page_size"
    max_page_size = 100

    def get_paginated_response(self, data):
        page = self.page
        total = page.paginator.count
        page_size = page.paginator.per_page
        return Response(
            {
                "data": data,
                "pagination": {
                    "total": total,
                    "page": page.number,
                    "page_size": page_size,
                    "total_pages": max(1, math.ceil(total / page_size)),
                    "has_next": page.has_next(),
                    "has_prev": page.has_previous(),
                },
            }
        )

    def get_paginated_response_schema(self, schema):
        return {
            "type": "object",
            "properties": {
                "data": schema,
                "pagination": {
                    "type": "object",
                    "properties": {
                        name: {"type": kind}
                        for name, kind in [
                            ("total", "integer"),
                            ("page", "integer"),
                            ("page_size", "integer"),
                            ("total_pages", "integer"),
                            ("has_next", "boolean"),
                            ("has_prev", "boolean"),
                        ]
                    },
                },
            },
        }


class Unprocessable(exceptions.APIException):
    """A well-formed request the current state of things does not allow.

    `field` names the input at fault; `extra` adds keys to the error body.
    """

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = "The request cannot be processed."
    default_code = "unprocessable"

    def __init__(self, detail=None, field=None, **extra):
        super().__init__(detail)
        self.field = field
        self.extra = extra


class BadInput(Unprocessable):
    """Input that is malformed or invalid (400), naming the field at fault, in the words of
    `detail` (a serializer's errors read "Invalid input (<fields>): ...")."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "The request is malformed."
    default_code = "invalid"


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state."
    default_code = "conflict"


class Gone(exceptions.APIException):
    status_code = status.HTTP_410_GONE
    default_detail = "The resource is gone."
    default_code = "gone"


class UpstreamFailed(exceptions.APIException):
    """A service LangHost asked on the caller's behalf (a model provider) failed: its words."""

    status_code = status.HTTP_502_BAD_GATEWAY
    default_detail = "The upstream service failed."
    default_code = "upstream_failed"


def _first_message(errors) -> str:
    if isinstance(errors, dict):
        for value in errors.values():
            return _first_message(value)
    if isinstance(errors, list) and errors:
        return _first_message(errors[0])
    return str(errors)


# What a query raises while the database is out of reach.
DATABASE_AWAY = (OperationalError, InterfaceError)


class DatabaseUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The database is out of reach just now; try again shortly."
    default_code = "database_unavailable"


def exception_handler(exc, context):
    """Every error is JSON with a human `detail`; validation errors also name their fields.

    Shape: `{"detail": "...", "errors": {"<field>": ["..."]}}` (errors only for validation).
    """
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, DjangoValidationError):  # a value the database cannot take
        exc = exceptions.ValidationError({"non_field_errors": exc.messages})
    elif isinstance(exc, DATABASE_AWAY):
        exc = DatabaseUnavailable()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        errors = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        fields = ", ".join(errors)
        response.data = {
            "detail": f"Invalid input ({fields}): {_first_message(errors)}",
            "errors": errors,
        }
    elif isinstance(exc, Unprocessable):
        response.data = {"detail": str(exc.detail), **exc.extra}
        if exc.field:
            response.data["errors"] = {exc.field: [str(exc.detail)]}
    elif isinstance(getattr(exc, "detail", None), dict):
        # simplejwt's `{detail, code, messages}` for a bad token: its one message, as above.
        response.data = {"detail": str(exc.detail.get("detail") or _first_message(exc.detail))}
    return response


def bad_request(request, exception=None):
    """400 for what Django refuses before any view (JSON under /api/); a body over the upload
    limit is a 413 saying the limit."""
    if isinstance(exception, RequestDataTooBig):
        return JsonResponse({"detail": upload_limit_text()}, status=413)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Bad request."}, status=400)
    return django_bad_request(request, exception)


def server_error(request):
    """500 for an error no view handled: JSON under /api/. The database out of reach (a restart,
    a failover) is a 503 everywhere: the request may be retried once it is back."""
    if isinstance(sys.exc_info()[1], DATABASE_AWAY):
        return JsonResponse({"detail": DatabaseUnavailable.default_detail}, status=503)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Server error."}, status=500)
    return django_server_error(request)


def not_found(request, exception=None):
    """404 for a URL no route matches: JSON under /api/, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": f"No API endpoint matches {request.path}."}, status=404)
    return page_not_found(request, exception)
