"""An agent type's `output_schema` (JSON Schema): the built-in agent asks its model for a
reply in that shape (OpenAI's JSON-schema response format where every model of the turn
has the `json_schema` ability, and always in its instructions), parses and checks the reply, and
asks once more when it does not match."""

import json
import re

import jsonschema

OPENAI = "openai"
# The ability of a model that takes OpenAI's JSON-schema response format (an endpoint that
# speaks OpenAI's API may not).
JSON_SCHEMA_ABILITY = "json_schema"
# A reply's first fenced code block, whatever its language tag.
FENCED = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)


def instructions(schema: dict) -> str:
    return ("\n\nAnswer with a single JSON value, and nothing else, that matches this JSON "
            f"Schema:\n{json.dumps(schema)}")


def response_format(schema: dict) -> dict:
    """OpenAI's JSON-schema response format (not strict: any schema is allowed)."""
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}


def parsed(text: str, schema: dict) -> tuple[object, str | None]:
    """`(value, None)` when the reply is JSON matching the schema (a fenced code block is
    read as its content), else `(None, what is wrong)`."""
    fenced = FENCED.search(text)
    body = fenced.group(1) if fenced else text.strip()
    try:
        value = json.loads(body)
    except ValueError as exc:
        return None, f"the reply is not JSON ({exc})"
    error = jsonschema.exceptions.best_match(
        jsonschema.validators.validator_for(schema)(schema).iter_errors(value))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "the reply"
        return None, f"{where}: {error.message}"
    return value, None


def schema_problem(schema) -> str | None:
    """Why `schema` is no JSON Schema an agent type can ask for; None when it is one."""
    if not isinstance(schema, dict):
        return "must be a JSON Schema object"
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return f"is not a valid JSON Schema: {exc.message}"
    return None
