"""OpenAPI schema additions: every operation documents the errors any request can meet."""

# The statuses the shared machinery answers for any operation: malformed input, sign-in and
# permission, an unknown or invisible object, a body over the upload limit or of another type,
# too many attempts; and those the door answers (conflict, gone, refused, unavailable).
ERROR_RESPONSES = {
    "400": "Malformed input; `errors` names the fields at fault.",
    "401": "Not signed in, or the token is invalid or expired.",
    "403": "Signed in, but not allowed to do this.",
    "404": "No such object, or not one you may see.",
    "409": "The object's state does not allow this now.",
    "410": "The object is gone (e.g. a terminated agent).",
    "413": "The request body is over the upload limit.",
    "415": "The request body's content type is not accepted.",
    "422": "Well-formed, but refused; `errors` names the field at fault.",
    "429": "Too many attempts; retry after `Retry-After` seconds.",
    "503": "A runner or the runtime is unavailable now.",
}

ERROR_SCHEMA = {
    "type": "object",
    "description": "`{detail, errors?}` (the LangBot surface answers `{code, msg}`).",
    "properties": {
        "detail": {"type": "string"},
        "errors": {"type": "object", "additionalProperties": True},
    },
    "additionalProperties": True,
}


def document_errors(result, generator, request, public):
    """drf-spectacular postprocessing hook: add `ERROR_RESPONSES` where an operation does not
    document that status itself."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for methods in result.get("paths", {}).values():
        for operation in methods.values():
            responses = operation.setdefault("responses", {})
            for code, description in ERROR_RESPONSES.items():
                responses.setdefault(code, {"description": description, "content": error})
    return result
