"""`/api/v1/runs`: start, list, read, cancel. Built-in runners here; plugin runs go over daphne."""

import json

import pytest
from asgiref.sync import async_to_sync

from ledger.models import AgentRun

pytestmark = pytest.mark.django_db(transaction=True)


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

    assert outsider_client.get("/api/v1/runs").json()["pagination"]["total"] == 0
    assert outsider_client.get(f"/api/v1/runs/{run.run_id}").status_code == 404


def test_runners_list_includes_builtin_echo(user_client):
    ids = [r["id"] for r in user_client.get("/api/v1/runners").json()["data"]]

    assert "builtin:echo" in ids
