"""The OpenAPI schema is generated without a warning, is valid, and describes the bodies that
starting a run, sending a message, conversations and artifacts answer with."""

import pytest
import yaml
from django.core.management import call_command
from drf_spectacular.drainage import GENERATOR_STATS

CONVERSATIONS = "/api/v1/projects/{project_id}/agents/{agent_id}/conversations"
CONVERSATION = f"{CONVERSATIONS}/{{conversation_id}}"
ARTIFACTS = f"{CONVERSATION}/artifacts"


@pytest.fixture(scope="module")
def schema(tmp_path_factory):
    """`manage.py spectacular --validate --fail-on-warn`: any warning or error fails it."""
    target = tmp_path_factory.mktemp("schema") / "schema.yml"
    GENERATOR_STATS.reset()  # only this generation's warnings count
    call_command("spectacular", validate=True, fail_on_warn=True, file=str(target))
    return yaml.safe_load(target.read_text())


def resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def body(schema: dict, path: str, method: str, status: int,
         media_type: str = "application/json") -> dict:
    response = schema["paths"][path][method]["responses"][str(status)]
    return resolve(schema, response["content"][media_type]["schema"])


def variants(schema: dict, node: dict) -> list[dict]:
    return [resolve(schema, variant) for variant in node["oneOf"]]


def listed(schema: dict, page: dict) -> dict:
    """The item of a paginated list: `{"data": [item], "pagination": {...}}`."""
    return resolve(schema, page["properties"]["data"]["items"])


def test_starting_a_run_answers_201_with_its_outcome_or_ndjson_frames(schema):
    outcome, refused = variants(schema, body(schema, "/api/v1/runs", "post", 201))
    frames = variants(schema, body(schema, "/api/v1/runs", "post", 201, "application/x-ndjson"))

    assert {"run_id", "status", "status_reason", "messages", "usage"} <= set(outcome["properties"])
    assert set(refused["properties"]) == {"type", "detail", "active_run_id"}
    assert len(frames) == 4 and all("type" in frame["properties"] for frame in frames)


def test_sending_a_message_answers_201_with_the_reply_or_ndjson_frames(schema):
    messages = f"{CONVERSATION}/messages"
    outcome, refused = variants(schema, body(schema, messages, "post", 201))
    frames = variants(schema, body(schema, messages, "post", 201, "application/x-ndjson"))

    assert {"run_id", "agent", "status", "status_reason", "reply", "usage"} <= set(
        outcome["properties"])
    assert set(refused["properties"]) == {"type", "agent", "detail", "active_run_id"}
    assert len(frames) == 4 and all("type" in frame["properties"] for frame in frames)


def test_conversation_operations_describe_their_bodies(schema):
    created = body(schema, CONVERSATIONS, "post", 201)
    shown = body(schema, CONVERSATION, "get", 200)
    updated = body(schema, CONVERSATION, "patch", 200)
    item = listed(schema, body(schema, CONVERSATIONS, "get", 200))

    assert set(item["properties"]) == {"id", "project_id", "agent_id", "title", "created_at",
                                       "updated_at"}
    assert set(updated["properties"]) == set(item["properties"]) | {"state"}
    assert set(shown["properties"]) == set(created["properties"]) == (
        set(item["properties"]) | {"state", "entries"})


def test_artifact_operations_describe_their_bodies(schema):
    uploaded = body(schema, ARTIFACTS, "post", 201)
    item = listed(schema, body(schema, ARTIFACTS, "get", 200))
    version = listed(schema, body(schema, f"{ARTIFACTS}/{{name}}/versions", "get", 200))
    download = body(schema, f"{ARTIFACTS}/{{name}}", "get", 200, "*/*")

    assert {"name", "latest_version", "size", "sha256"} <= set(item["properties"])
    assert set(uploaded["properties"]) == set(version["properties"])
    assert {"name", "version", "size", "custom_metadata"} <= set(version["properties"])
    assert download == {"type": "string", "format": "binary"}
