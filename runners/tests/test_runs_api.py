"""`/api/v1/runs`: start, list, read, cancel. Built-in runners here; plugin runs go over daphne."""

import base64
import json
import uuid

import pytest
from asgiref.sync import async_to_sync

from ledger.models import AgentRun, RunGrants

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.backend]


def body(response) -> bytes:
    """The whole body; run responses stream from an async iterator."""
    if not response.streaming:
        return response.content

    async def collect():
        return b"".join([chunk async for chunk in response.streaming_content])

    return async_to_sync(collect)()


def start(client, payload, stream=False):
    """POST a run and read its whole body (the run happens as the body is read)."""
    url = "/api/v1/runs" + ("?stream=1" if stream else "")
    response = client.post(url, payload, format="json")
    response.body = body(response)
    return response


def test_run_of_builtin_echo_answers_201_with_the_outcome(superuser_client):
    response = start(superuser_client, {"runner_id": "builtin:echo", "input": {"text": "ping"}})

    assert response.status_code == 201
    outcome = json.loads(response.body)
    assert outcome["status"] == "completed"
    assert outcome["messages"][0]["data"]["message"]["content"] == "echo: ping"


def test_streamed_run_sends_ndjson_frames_ending_with_the_outcome(superuser_client):
    response = start(superuser_client, {"runner_id": "builtin:echo", "input": {"text": "x"}},
                     stream=True)

    frames = [json.loads(line) for line in response.body.decode().splitlines()]
    assert response["Content-Type"] == "application/x-ndjson"
    assert [f["type"] for f in frames] == ["run.started", "message.completed", "run.finished"]
    assert frames[-1]["status"] == "completed"


def test_run_needs_exactly_one_target(superuser_client):
    response = start(superuser_client, {"input": {"text": "x"}})

    assert response.status_code == 400
    assert "runner_id" in response.json()["errors"]


def test_unknown_runner_is_refused_naming_runner_id(superuser_client):
    response = start(superuser_client, {"runner_id": "builtin:nope", "input": {"text": "x"}})

    assert response.status_code == 422
    assert "runner_id" in response.json()["errors"]


def test_regular_user_cannot_run_a_runner_directly(user_client):
    response = start(user_client, {"runner_id": "builtin:echo", "input": {"text": "x"}})

    assert response.status_code == 403


def test_runs_list_filters_by_status_and_shows_events(superuser_client):
    start(superuser_client, {"runner_id": "builtin:echo", "input": {"text": "a"}, "event_id": "ev-a"})
    run = AgentRun.objects.get(event_id="ev-a")

    listed = superuser_client.get("/api/v1/runs?status=completed").json()
    events = superuser_client.get(f"/api/v1/runs/{run.run_id}/events?after_sequence=1").json()

    assert [r["run_id"] for r in listed["data"]] == [run.run_id]
    assert [e["type"] for e in events["data"]] == ["run.completed"]


def test_cancelling_an_ended_run_answers_422_naming_its_status(superuser_client):
    start(superuser_client, {"runner_id": "builtin:echo", "input": {"text": "a"}, "event_id": "ev-c"})
    run = AgentRun.objects.get(event_id="ev-c")

    response = superuser_client.post(f"/api/v1/runs/{run.run_id}/cancel")

    assert response.status_code == 422
    assert response.json()["current_status"] == "completed"


def test_runs_of_other_projects_are_hidden(superuser_client, outsider_client):
    start(superuser_client, {"runner_id": "builtin:echo", "input": {"text": "a"}, "event_id": "ev-h"})
    run = AgentRun.objects.get(event_id="ev-h")

    assert outsider_client.get("/api/v1/runs").json()["data"] == []
    assert outsider_client.get(f"/api/v1/runs/{run.run_id}").status_code == 404


def test_runners_list_includes_builtin_echo(user_client):
    ids = [r["id"] for r in user_client.get("/api/v1/runners").json()["data"]]

    assert "builtin:echo" in ids


def make_runs(count: int, **fields) -> list[str]:
    runs = [AgentRun(run_id=f"r-{uuid.uuid4()}", event_id=f"e-{uuid.uuid4()}",
                     runner_id="builtin:echo", status="completed", **fields)
            for _ in range(count)]
    AgentRun.objects.bulk_create(runs)
    return [run.run_id for run in runs]


def walk(client, url: str) -> tuple[list[str], list[dict]]:
    """Every run id of every page from `url` on, following `next`; and the pages."""
    ids, pages = [], []
    while url:
        page = client.get(url).json()
        pages.append(page)
        ids += [run["run_id"] for run in page["data"]]
        url = page["pagination"]["next"]
    return ids, pages


def test_walking_the_runs_by_cursor_returns_each_once_newest_first_while_runs_are_added(
        user_client, user, project):
    mine = make_runs(10, actor_type="user", actor_id=str(user.pk))
    projects = make_runs(15, project_id=str(project.pk), actor_type="user", actor_id="someone")
    expected = list(reversed(mine + projects))  # created in this order: newest last

    ids, page = [], user_client.get("/api/v1/runs?page_size=7").json()
    while True:
        ids += [run["run_id"] for run in page["data"]]
        make_runs(2, project_id=str(project.pk))  # added meanwhile: before the first page
        if not page["pagination"]["next"]:
            break
        page = user_client.get(page["pagination"]["next"]).json()

    assert ids == expected
    first = user_client.get("/api/v1/runs?page_size=7").json()
    second = user_client.get(first["pagination"]["next"]).json()
    back = user_client.get(second["pagination"]["previous"]).json()
    assert [run["run_id"] for run in back["data"]] == [run["run_id"] for run in first["data"]]
    assert set(first["pagination"]) == {"page_size", "has_next", "has_prev", "next",
                                        "previous"}


def test_the_runs_list_holds_a_members_own_runs_and_an_owners_projects(
        user_client, member_client, member, user, project):
    theirs = make_runs(3, actor_type="user", actor_id=str(member.pk), project_id=str(project.pk))
    elsewhere = make_runs(2, actor_type="user", actor_id="stranger", project_id="elsewhere")

    members, _ = walk(member_client, "/api/v1/runs?page_size=2")
    owners, _ = walk(user_client, "/api/v1/runs?page_size=2")

    assert members == list(reversed(theirs))
    assert owners == list(reversed(theirs))  # the project's, though the owner started none
    assert not set(elsewhere) & set(members + owners)


def test_a_cursor_or_page_the_list_did_not_give_is_a_400_naming_it(user_client):
    for query, field in (("cursor=%%%", "cursor"), ("cursor=eDE", "cursor"),
                         ("page=2", "page"), ("page_size=500", "page_size")):
        response = user_client.get(f"/api/v1/runs?{query}")
        assert response.status_code == 400, (query, response.content)
        assert field in response.json()["errors"], query


def test_runs_of_one_binding_share_one_grants_row_and_read_their_whole_snapshot(
        superuser_client):
    for text in ("a", "b"):
        start(superuser_client, {"runner_id": "builtin:echo", "input": {"text": text}})
    first, second = AgentRun.objects.order_by("id")

    assert RunGrants.objects.count() == 1
    assert first.grants_digest == second.grants_digest != ""
    assert "resources" not in first.authorization_json  # kept once, not on each row
    assert first.authorization()["runner_id"] == "builtin:echo"
    assert set(first.authorization()["resources"]) == {"models", "tools", "knowledge_bases",
                                                       "skills"}


def test_a_forged_cursor_holding_infinity_is_a_400_naming_it(user_client):
    forged = base64.urlsafe_b64encode(b'["b",Infinity]').decode().rstrip("=")

    response = user_client.get(f"/api/v1/runs?cursor={forged}")

    assert response.status_code == 400 and "cursor" in response.json()["errors"]
