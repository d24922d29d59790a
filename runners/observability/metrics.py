"""This process's Prometheus metrics: `GET /metrics` of a web process, `/metrics` on a runtime
worker's health port. Each process counts what happens in it (run a Prometheus job over all).

Counted as it happens: runs started and ended (from the ledger's signals, once committed) and
their durations, time to first token, model calls with their tokens and cost, tool calls,
journal commits, the runtime workers' round trips over the Channels layer. Read at each scrape
(`refresh`): runs active now, the runtime link's state and sessions, runners by availability.
"""

import hmac

from django.conf import settings
from django.db.models import Count
from django.dispatch import receiver
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ledger import signals
from ledger.selectors.runs import active_counts
from runners.models import RunnerDescriptor

REGISTRY = CollectorRegistry(auto_describe=True)
CONTENT_TYPE = CONTENT_TYPE_LATEST

# Seconds: a tool call or an echo run at the low end, a long agent run at the high one.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
                    600)
QUICK_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)

RUNS_STARTED = Counter("langhost_runs_started", "Runs that began executing, by runner.",
                       ["runner"], registry=REGISTRY)
RUNS_ENDED = Counter("langhost_runs_ended", "Runs that ended, by runner and status.",
                     ["runner", "status"], registry=REGISTRY)
RUN_DURATION = Histogram("langhost_run_duration_seconds",
                         "From a run's start to its end, by runner.", ["runner"],
                         buckets=DURATION_BUCKETS, registry=REGISTRY)
TIME_TO_FIRST_TOKEN = Histogram("langhost_time_to_first_token_seconds",
                                "From a run's start to its first streamed text, by runner.",
                                ["runner"], buckets=DURATION_BUCKETS, registry=REGISTRY)
MODEL_CALLS = Counter("langhost_model_calls", "Model calls (each attempt), by model and status.",
                      ["model", "status"], registry=REGISTRY)
MODEL_TOKENS = Counter("langhost_model_tokens",
                       "Tokens of model calls, by model and direction (input, output).",
                       ["model", "direction"], registry=REGISTRY)
MODEL_COST = Counter("langhost_model_cost",
                     "Cost of model calls, in the currency of the models' prices, by model.",
                     ["model"], registry=REGISTRY)
TOOL_CALLS = Counter("langhost_tool_calls", "Tool calls, by tool and outcome (ok, error).",
                     ["tool", "outcome"], registry=REGISTRY)
JOURNAL_COMMITS = Histogram("langhost_journal_commit_seconds",
                            "How long writing a batch of a run's results took.",
                            buckets=QUICK_BUCKETS, registry=REGISTRY)
CHANNEL_ROUND_TRIPS = Histogram(
    "langhost_channel_layer_round_trip_seconds",
    "A request to the runtime workers over the Channels layer until its answer, by kind.",
    ["kind"], buckets=QUICK_BUCKETS, registry=REGISTRY)
RUNS_ACTIVE = Gauge("langhost_runs_active", "Runs queued or running now, by status.",
                    ["status"], registry=REGISTRY)
RUNTIME_LINK_UP = Gauge("langhost_runtime_link_up",
                        "1 when this process's runtime link is ready, else 0.", registry=REGISTRY)
RUNTIME_LINK_SESSIONS = Gauge("langhost_runtime_link_sessions",
                              "Sessions of the runtime link since this process started (a "
                              "restart of the runtime begins a new one).", registry=REGISTRY)
RUNNERS = Gauge("langhost_runners", "Runners known, by availability.", ["available"],
                registry=REGISTRY)


@receiver(signals.run_started)
def _run_started(run: dict, **kwargs) -> None:
    RUNS_STARTED.labels(run["runner_id"]).inc()


@receiver(signals.run_ended)
def _run_ended(run: dict, **kwargs) -> None:
    RUNS_ENDED.labels(run["runner_id"], run["status"]).inc()
    if run.get("started_at") and run.get("finished_at"):
        RUN_DURATION.labels(run["runner_id"]).observe(
            max((run["finished_at"] - run["started_at"]).total_seconds(), 0.0))


@receiver(signals.model_calls_recorded)
def _model_calls(rows: list[dict], **kwargs) -> None:
    for row in rows:
        model = row.get("model_name") or row.get("model_id") or ""
        MODEL_CALLS.labels(model, row.get("status") or "").inc()
        MODEL_TOKENS.labels(model, "input").inc(int(row.get("input_tokens") or 0))
        MODEL_TOKENS.labels(model, "output").inc(int(row.get("output_tokens") or 0))
        MODEL_COST.labels(model).inc(float(row.get("cost") or 0))


def refresh(active: dict[str, int], link: dict | None, runners: dict[bool, int]) -> None:
    """Set what is read at each scrape: active runs by status, the runtime link's status
    (None where this process has no link of its own), runners by availability."""
    for status in ("queued", "running"):
        RUNS_ACTIVE.labels(status).set(active.get(status, 0))
    if link is not None:
        RUNTIME_LINK_UP.set(1 if link.get("state") == "ready" else 0)
        RUNTIME_LINK_SESSIONS.set(link.get("sessions") or 0)
    for available in (True, False):
        RUNNERS.labels(str(available).lower()).set(runners.get(available, 0))


def may_read(authorization: str, local: bool) -> bool:
    """Whether a request with this `Authorization` header may read the metrics: the bearer of
    `LANGHOST_METRICS_TOKEN`, or, while it is unset, a `local` one (from this machine)."""
    token = settings.LANGHOST_METRICS_TOKEN
    if not token:
        return local
    return authorization.startswith("Bearer ") and hmac.compare_digest(
        authorization.removeprefix("Bearer ").encode(), token.encode())


def read_ledger() -> tuple[dict, dict]:
    """What `refresh` needs of the database: active runs by status, runners by availability."""
    runners = dict(RunnerDescriptor.objects.values("available").annotate(n=Count("id"))
                   .order_by().values_list("available", "n"))
    return active_counts(), runners


def exposition() -> bytes:
    return generate_latest(REGISTRY)
