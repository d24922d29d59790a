"""`GET /metrics`: Prometheus text counting this process's runs, open to this machine or to the
bearer of `LANGHOST_METRICS_TOKEN` only."""

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)  # the counts follow commits


def sample(text: str, name: str, **labels) -> float:
    """The value of the `name{labels}` sample in the exposition `text` (0 when absent)."""
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if match and all(f'{key}="{value}"' in match.group(1) for key, value in labels.items()):
            return float(match.group(2))
    return 0.0


def scrape(client=None, **headers) -> str:
    response = (client or Client()).get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain")
    return response.content.decode()


def test_a_run_is_counted_started_and_ended_with_its_duration(superuser_client):
    before = scrape()

    started = superuser_client.post("/api/v1/runs", {"runner_id": "builtin:echo",
                                                     "input": {"text": "hi"}}, format="json")
    after = scrape()

    assert started.status_code == 201
    for name, labels in (("langhost_runs_started_total", {"runner": "builtin:echo"}),
                         ("langhost_runs_ended_total", {"runner": "builtin:echo",
                                                        "status": "completed"}),
                         ("langhost_run_duration_seconds_count", {"runner": "builtin:echo"})):
        assert sample(after, name, **labels) - sample(before, name, **labels) == 1, name
    assert sample(after, "langhost_runs_active", status="running") == 0
    assert sample(after, "langhost_runners", available="true") >= 1


def test_metrics_are_refused_off_this_machine_and_need_the_token_once_set(settings):
    assert Client(REMOTE_ADDR="203.0.113.9").get("/metrics").status_code == 403
    assert Client(HTTP_X_FORWARDED_FOR="203.0.113.9").get("/metrics").status_code == 403

    settings.LANGHOST_METRICS_TOKEN = "scrape-secret"
    refused = Client().get("/metrics")
    wrong = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer nope")

    assert (refused.status_code, wrong.status_code) == (403, 403)
    assert "LANGHOST_METRICS_TOKEN" in refused.json()["detail"]
    assert "scrape-secret" not in refused.content.decode()
    scrape(Client(REMOTE_ADDR="203.0.113.9"), HTTP_AUTHORIZATION="Bearer scrape-secret")
