"""The API's door, proved for every operation the OpenAPI schema lists, so for every new one too.

- Anyone not signed in gets 401 with the JSON error body, except on the few PUBLIC_OPERATIONS.
- A signed-in user who is not a member of a project gets 404 from every operation on it and
  its objects (`/api/v1/projects/{id}/...`), asked with the real ids of its project, agent,
  conversation, artifact and member.
- A conversation is its opener's: another member of the project gets 404 from its operations.
- A run is seen by its actor, its project's owner and superusers: anyone else gets 404 from
  `runs/{run_id}`, its events and cancel.
- Every route under `/api/` is an operation of the schema, or one of the few pages that are
  not (ROUTES_OUTSIDE_THE_SCHEMA): a view the schema misses would escape these tests.
"""

import functools
import json
import re
import uuid
from collections import defaultdict
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import URLResolver, get_resolver
from django.utils import timezone
from drf_spectacular.generators import EndpointEnumerator, SchemaGenerator
from rest_framework.schemas.generators import is_api_view

from accounts.models import Membership
from ledger.models import Conversation, Interaction
from runners.knowledge import services as knowledge
from runners.knowledge.models import KnowledgeBase
from runners.models import LLMModel, ModelProvider
from runners.tests.conversation_fixtures import conversations_url, read_body

pytestmark = pytest.mark.backend

PUBLIC_OPERATIONS = {
    ("POST", "/api/v1/auth/register"),
    ("POST", "/api/v1/auth/login"),
    ("POST", "/api/v1/auth/refresh"),
    ("POST", "/api/v1/auth/logout"),  # the refresh token it revokes is the credential
    ("POST", "/api/v1/user/init"),  # LangBot: create the first superuser
    ("POST", "/api/v1/user/auth"),  # LangBot: sign in
    # A run's attachment, through the link signed for that run: the link is the credential.
    ("GET", "/api/v1/runs/{run_id}/attachments/{token}"),
}

ROUTES_OUTSIDE_THE_SCHEMA = {
    "/api/v1/",  # the API root: links to the operations below
    "/api/schema/",  # the OpenAPI schema
    "/api/docs/",  # Swagger UI
    "/api/auth/login/",  # the browsable API's session sign-in pages
    "/api/auth/logout/",
    "/api/v1/plugins/_sdk/page-sdk.js",  # the SDK's script for plugin pages, the same for all
}

# A body every operation here takes as well formed (a message's text), so what answers is
# the door rather than input validation.
WELL_FORMED_BODY = {"text": "Hello"}
METHODS_WITH_A_BODY = {"POST", "PUT", "PATCH"}


@functools.cache
def operations() -> list[tuple[str, str]]:
    """`(METHOD, path)` of every operation of the generated OpenAPI schema."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return sorted((method.upper(), path) for path, item in schema["paths"].items()
                  for method in item)


def operations_where(keep) -> list[tuple[str, str]]:
    return [operation for operation in operations() if keep(*operation)]


def ids_of(found: list[tuple[str, str]]) -> list[str]:
    return [f"{method} {path}" for method, path in found]


def api_routes(patterns=None, prefix=""):
    """`(path as the schema writes it, view)` of every URL route under `/api/`."""
    enumerator = EndpointEnumerator()
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from api_routes(pattern.url_patterns, route)
            continue
        # The schema names a router's `pk` `id` (SCHEMA_COERCE_PATH_PK).
        path = enumerator.get_path_from_regex(route).replace("{pk}", "{id}")
        if path.startswith("/api/"):
            yield path, pattern.callback


def call(client, method: str, url: str):
    body = WELL_FORMED_BODY if method in METHODS_WITH_A_BODY else None
    response = getattr(client, method.lower())(url, body, format="json")
    read_body(response)  # a run that starts would happen as its body is read
    return response


# The LangBot-compatible surface answers every error in LangBot's shape.
LANGBOT_SURFACE = ("/api/v1/user/", "/api/v1/pipelines/", "/api/v1/system/")


def assert_json_error(response, status: int):
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    langbot = response.wsgi_request.path.startswith(LANGBOT_SURFACE)
    assert set(response.json()) == ({"code", "msg"} if langbot else {"detail"})


# --- real objects of someone else's project -------------------------------------------------

@pytest.fixture
def member(make_user, project):
    """A member of the owner's project who opened none of its conversations or runs."""
    member = make_user("bob@example.com")
    Membership.objects.create(project=project, user=member)
    return member


@pytest.fixture
def member_client(member, jwt_client):
    return jwt_client(member)


@pytest.fixture
def owners_objects(user_client, project, agent, agent_type, member):
    """The path parameters of every operation, filled with the owner's (`user`'s) objects.

    `{id}` is the id of the collection it follows (`projects/{id}`, `agent-types/{id}`).
    """
    conversation_url = f"{conversations_url(agent)}/plans"
    opened = user_client.post(conversations_url(agent), {"conversation_id": "plans"},
                              format="json")
    uploaded = user_client.post(f"{conversation_url}/artifacts",
                                {"name": "notes.txt", "text": "one"}, format="json")
    started = user_client.post("/api/v1/runs", {"agent_id": str(agent.pk),
                                                "input": {"text": "hi"}}, format="json")
    assert (opened.status_code, uploaded.status_code, started.status_code) == (201, 201, 201)
    provider = ModelProvider.objects.create(name="door-embeddings", kind="openai",
                                            base_url="http://127.0.0.1:9/v1")
    knowledge_base = KnowledgeBase.objects.create(
        project=project, name="Door", embedding_model=LLMModel.objects.create(
            name="door-embedder", provider=provider, upstream_model="embedder",
            model_type="embedding"))
    document = knowledge.add_document(knowledge_base, SimpleUploadedFile("door.md", b"hi"))
    schedule = user_client.post(f"/api/v1/projects/{project.pk}/schedules", {
        "name": "Door", "cron": "0 9 * * *", "agent_id": str(agent.pk)}, format="json")
    assert schedule.status_code == 201, schedule.content
    question = Interaction.objects.create(
        run_id="door-run", interaction_id="door-question",
        conversation_id=Conversation.objects.get(client_id="plans").conversation_id,
        runner_id="builtin:echo", kind="confirmation", title="Door?", token_hash="0" * 64,
        request_json={"interaction_id": "door-question", "title": "Door?",
                      "fallback_text": "Door?"},
        expires_at=timezone.now() + timedelta(hours=1))
    return {
        "knowledge_base_id": knowledge_base.pk, "document_id": document.pk,
        "projects": project.pk, "agent-types": agent_type.pk, "runners": "builtin:echo",
        "slug": agent_type.slug, "user_id": member.pk, "project_id": project.pk,
        "agent_id": agent.pk, "conversation_id": opened.json()["id"],
        "name": uploaded.json()["name"], "run_id": json.loads(read_body(started))["run_id"],
        "skill_name": "tide-reader", "schedule_id": schedule.json()["id"],
        "interaction_id": question.interaction_id,
    }


def url_of(path: str, objects: dict) -> str:
    def value(match):
        name = match.group(1)
        if name == "id":
            name = path[:match.start()].rstrip("/").rsplit("/", 1)[-1]
        return str(objects[name])

    return re.sub(r"\{(\w+)\}", value, path)


# --- anyone not signed in -------------------------------------------------------------------

SIGNED_IN_ONLY = operations_where(lambda method, path: (method, path) not in PUBLIC_OPERATIONS)


@pytest.mark.parametrize(("method", "path"), SIGNED_IN_ONLY, ids=ids_of(SIGNED_IN_ONLY))
def test_operation_refuses_an_anonymous_caller_with_401(anon_client, owners_objects, method,
                                                        path):
    # Refused before any lookup: ids no fixture makes yet (a new collection) need no object.
    any_objects = defaultdict(lambda: str(uuid.uuid4()), owners_objects)
    response = call(anon_client, method, url_of(path, any_objects))

    assert_json_error(response, 401)
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_every_public_operation_is_in_the_schema():
    assert PUBLIC_OPERATIONS <= set(operations())


@pytest.mark.parametrize(("method", "path"), sorted(PUBLIC_OPERATIONS),
                         ids=ids_of(sorted(PUBLIC_OPERATIONS)))
def test_public_operation_answers_an_anonymous_caller(anon_client, method, path):
    response = getattr(anon_client, method.lower())(path, {}, format="json")

    assert response.status_code not in (401, 403)


def test_every_api_route_is_an_operation_of_the_schema():
    schema_operations, enumerator = set(operations()), EndpointEnumerator()
    missed = [
        (method, path)
        for path, view in api_routes() if path not in ROUTES_OUTSIDE_THE_SCHEMA
        for method in (enumerator.get_allowed_methods(view) if is_api_view(view)
                       else ["any method"])
        if (method, path) not in schema_operations
    ]

    assert missed == []


# --- a signed-in user who is not a member of the project ------------------------------------

ON_A_PROJECT = operations_where(lambda method, path: path.startswith("/api/v1/projects/{"))


@pytest.mark.parametrize(("method", "path"), ON_A_PROJECT, ids=ids_of(ON_A_PROJECT))
def test_project_operation_refuses_a_non_member_with_404(outsider_client, owners_objects,
                                                         method, path):
    response = call(outsider_client, method, url_of(path, owners_objects))

    assert_json_error(response, 404)


READING_A_PROJECT = [(method, path) for method, path in ON_A_PROJECT if method == "GET"]


@pytest.mark.parametrize(("method", "path"), READING_A_PROJECT, ids=ids_of(READING_A_PROJECT))
def test_project_read_answers_the_owner(user_client, owners_objects, method, path):
    """The ids the refusals are asked with are real: the owner reads every one of them."""
    response = call(user_client, method, url_of(path, owners_objects))

    assert response.status_code == 200, response.content


# --- a member of the project who did not open the conversation ------------------------------

ON_A_CONVERSATION = [(method, path) for method, path in ON_A_PROJECT
                     if "{conversation_id}" in path]


@pytest.mark.parametrize(("method", "path"), ON_A_CONVERSATION, ids=ids_of(ON_A_CONVERSATION))
def test_conversation_operation_refuses_another_member_with_404(member_client, owners_objects,
                                                                method, path):
    response = call(member_client, method, url_of(path, owners_objects))

    assert_json_error(response, 404)


# --- someone who is neither the run's actor, its project's owner nor a superuser ------------

# (A public operation on a run, its attachment link, is its own credential: tested with it.)
ON_A_RUN = operations_where(lambda method, path: "{run_id}" in path
                           and (method, path) not in PUBLIC_OPERATIONS)


@pytest.mark.parametrize("stranger", ["outsider_client", "member_client"])
@pytest.mark.parametrize(("method", "path"), ON_A_RUN, ids=ids_of(ON_A_RUN))
def test_run_operation_refuses_a_stranger_with_404(request, owners_objects, stranger, method,
                                                   path):
    response = call(request.getfixturevalue(stranger), method, url_of(path, owners_objects))

    assert_json_error(response, 404)


def test_run_answers_its_actor(user_client, owners_objects):
    response = user_client.get(f"/api/v1/runs/{owners_objects['run_id']}")

    assert response.status_code == 200
