"""Model calls in the ledger: one row per attempt, summed per run and per agent."""

from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync

from ledger.models import ModelCall
from ledger.selectors.model_calls import usage_for_agent, usage_for_run
from ledger.services.model_calls import record_model_call

pytestmark = [pytest.mark.django_db, pytest.mark.backend]

record = async_to_sync(record_model_call)


def call(**fields):
    return {"run_id": "run-1", "agent_id": "agent-1", "model_id": "m-1", "model_name": "gpt",
            "status": "ok", "input_tokens": 100, "output_tokens": 10, "cached_tokens": 40,
            "cost": Decimal("0.0012"), "latency_ms": 300, **fields}


def test_each_attempt_is_one_row():
    record(**call(attempt=1, status="error", error="HTTP 500", input_tokens=0, output_tokens=0,
                  cached_tokens=0, cost=Decimal(0)))
    record(**call(attempt=2, first_token_ms=120))

    rows = list(ModelCall.objects.order_by("id").values_list("attempt", "status", "first_token_ms"))
    assert rows == [(1, "error", None), (2, "ok", 120)]


def test_usage_sums_a_runs_and_an_agents_calls():
    record(**call())
    record(**call(run_id="run-2"))
    record(**call(run_id="run-3", agent_id="agent-2"))

    assert usage_for_run("run-1") == {"calls": 1, "input_tokens": 100, "output_tokens": 10,
                                      "cached_tokens": 40, "cost": Decimal("0.0012")}
    assert usage_for_agent("agent-1") == {"calls": 2, "input_tokens": 200, "output_tokens": 20,
                                          "cached_tokens": 80, "cost": Decimal("0.0024")}
    assert usage_for_run("nothing") == {"calls": 0, "input_tokens": 0, "output_tokens": 0,
                                        "cached_tokens": 0, "cost": Decimal(0)}
