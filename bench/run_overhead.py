"""What the orchestrator costs on top of the bare runtime round trip.

Self-contained: makes a temporary data dir (SQLite, WAL), copies the echo fixture plugin into
it, spawns one runtime over stdio, and measures in the same run:
  - bare:         `run_runner` over the runtime link with the context the orchestrator builds for
                  the same event (so both sides send the same payload), results read and dropped;
  - orchestrator: the same runner through `Orchestrator.run` (journal, events, state, transcript).
Sequential: median and p95 latency of one run. Concurrent: runs/s with 16 runs in flight.
Then the `sql:` line counts the statements of a `builtin:echo` run and of a message to an
agent of it (`tests/sql_statements.py`).

    .venv/bin/python bench/run_overhead.py [--runs 200] [--seconds 5]

The last line reads `overhead: latency_ratio=X throughput_ratio=Y`
(orchestrator median / bare median; orchestrator runs/s / bare runs/s).
"""

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ECHO_PLUGIN = ROOT / "tests" / "fixtures" / "plugins" / "e2e__agent-runner-qa"
RUNNER = ("e2e", "agent-runner-qa", "default")
CONCURRENCY = 16
WARMUP = 20
ROUNDS = 5


def setup_django(data_dir: Path) -> None:
    os.environ["LANGHOST_DATA_DIR"] = str(data_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "langhost.settings")
    os.environ.setdefault("LANGHOST_LOG_LEVEL", "WARNING")
    sys.path.insert(0, str(ROOT))
    import django
    from django.core.management import call_command

    from langhost.base import data_dir as langhost_data_dir

    langhost_data_dir.prepare()  # the secret key, as manage.py makes it
    django.setup()
    call_command("migrate", verbosity=0)
    from runners.observability import tracing

    tracing.setup()  # as a server does: spans go out when OTEL_EXPORTER_OTLP_ENDPOINT is set


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def timed(one_run) -> float:
    started = time.perf_counter()
    await one_run()
    return time.perf_counter() - started


async def runs_per_second(one_run, seconds: float) -> tuple[int, float]:
    """Runs completed with CONCURRENCY in flight for `seconds`, and the time they took."""
    done = 0
    stop_at = time.perf_counter() + seconds

    async def worker():
        nonlocal done
        while time.perf_counter() < stop_at:
            await one_run()
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return done, time.perf_counter() - started


async def measure(sides: dict, runs: int, seconds: float) -> dict:
    """Median, p95 and runs/s of each side (no runs/s, None, when `seconds` is 0).

    The sides take turns (run for run, then in ROUNDS slices of the concurrent phase), so a
    machine that speeds up or slows down during the benchmark weighs on both alike.
    """
    for one_run in sides.values():
        for _ in range(WARMUP):
            await one_run()
    latencies = {name: [] for name in sides}
    for _ in range(runs):
        for name, one_run in sides.items():
            latencies[name].append(await timed(one_run))
    totals = {name: [0, 0.0] for name in sides}
    for _ in range(ROUNDS if seconds else 0):
        for name, one_run in sides.items():
            done, elapsed = await runs_per_second(one_run, seconds / ROUNDS)
            totals[name][0] += done
            totals[name][1] += elapsed
    return {name: {"median": statistics.median(latencies[name]),
                   "p95": percentile(latencies[name], 0.95),
                   "throughput": totals[name][0] / totals[name][1] if seconds else None}
            for name in sides}


ECHO_BINDING = {"binding_id": "bench", "runner_id": "plugin:e2e/agent-runner-qa/default",
                "state_policy": {"state_scopes": ["conversation"]}}


def new_event():
    from runners.protocol import AgentEventEnvelope

    return AgentEventEnvelope(conversation_id="bench", input={"text": "bench"})


def echo_runtime(data_dir: Path):
    """A gateway to one runtime over stdio loading the echo fixture plugin (not started)."""
    from runners.plugins.gateway import LocalGateway

    plugins = data_dir / "plugins"
    shutil.copytree(ECHO_PLUGIN, plugins / ECHO_PLUGIN.name)
    return LocalGateway(plugins_dir=plugins, runtime_dir=data_dir / "runtime", url="",
                        instance="bench")


async def bare_round_trip(gateway):
    """One echo run straight over the runtime link, sent the context the orchestrator builds
    for the same event: the yardstick of every benchmark here."""
    from runners.execution import context
    from runners.plugins import registry
    from runners.protocol import AgentBinding

    binding = AgentBinding(**ECHO_BINDING)
    descriptor = await registry.get_descriptor(binding.runner_id, gateway.discover)
    event = new_event()
    bare_payload = context.build_context(
        run_id="", event=event, binding=binding, deadline_at=None,
        apis=context.available_apis(event, binding, descriptor),
        state={"conversation": {"e2e.echo_count": {"count": 1}}})

    async def bare_run():
        run_id = str(uuid.uuid4())
        payload = {**bare_payload, "run_id": run_id,
                   "runtime": {**bare_payload["runtime"], "trace_id": run_id}}
        async for _ in gateway.link.run_runner(*RUNNER, payload, 30.0):
            pass

    return bare_run


def echo_agent():
    """A user's agent of `builtin:echo` and their conversation with it."""
    from django.contrib.auth import get_user_model

    from accounts.models import Project
    from ledger.services import conversations
    from runners.models import AgentInstance, AgentType

    user = get_user_model().objects.create_user(email="sql@example.com", password=None)
    project = Project.objects.create(owner=user, name="SQL", slug="sql")
    agent_type = AgentType.objects.create(name="Echo", slug="echo", runner_id="builtin:echo")
    agent = AgentInstance.objects.create(project=project, agent_type=agent_type, name="echo")
    conversation = conversations.create(project_id=str(project.pk), agent_id=str(agent.pk),
                                        user_id=str(user.pk))
    return user, agent, conversation.client_id


async def statement_counts(orchestrator) -> str:
    """The `sql:` line: the statements of an echo run and of an agent's message, each the
    second of its kind (`runners/tests/test_hot_path_sql.py` pins them)."""
    from asgiref.sync import sync_to_async

    from tests import sql_statements as sql

    await sql.echo_run(orchestrator, "sql-warm-up")
    echo_run = await sql.echo_run(orchestrator)
    user, agent, conversation_id = await sync_to_async(echo_agent)()
    await sql.agent_message(user, agent, conversation_id)
    agent_message = await sql.agent_message(user, agent, conversation_id)
    return f"sql: echo_run={len(echo_run)} agent_message={len(agent_message)}"


async def main(runs: int, seconds: float, data_dir: Path) -> None:
    from runners.execution.orchestrator import Orchestrator
    from runners.protocol import AgentBinding

    gateway = echo_runtime(data_dir)
    try:
        await gateway.discover()
        orchestrator = Orchestrator(gateway)
        bare_run = await bare_round_trip(gateway)

        async def orchestrated_run():
            async for _ in orchestrator.run(new_event(), AgentBinding(**ECHO_BINDING)):
                pass

        results = await measure({"bare": bare_run, "orchestrator": orchestrated_run},
                                runs, seconds)
        statements = await statement_counts(orchestrator)
    finally:
        await gateway.stop()

    bare, orchestrated = results["bare"], results["orchestrator"]
    for name, result in results.items():
        print(f"{name:>12}: median {result['median'] * 1000:.2f} ms, "
              f"p95 {result['p95'] * 1000:.2f} ms, {CONCURRENCY}-way {result['throughput']:.1f} runs/s")
    latency_ratio = orchestrated["median"] / bare["median"]
    throughput_ratio = orchestrated["throughput"] / bare["throughput"]
    print(statements)
    print("targets: latency_ratio <= 1.4, throughput_ratio >= 0.8")
    print(f"overhead: latency_ratio={latency_ratio:.2f} throughput_ratio={throughput_ratio:.2f}")


def parse_arguments(doc: str) -> argparse.Namespace:
    """`--runs` and `--seconds`, as every benchmark here takes them."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="sequential runs per side")
    parser.add_argument("--seconds", type=float, default=5.0, help="concurrent phase per side")
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_arguments(__doc__)
    with tempfile.TemporaryDirectory(prefix="langhost-bench-") as tmp:
        setup_django(Path(tmp))
        asyncio.run(main(args.runs, args.seconds, Path(tmp)))
