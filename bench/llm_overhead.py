"""What LangHost adds to a model's time to first token.

Self-contained: a temporary data dir (SQLite), a scripted OpenAI-compatible server on
127.0.0.1 (`tests/fake_providers.py`), the echo fixture plugin in one runtime over stdio, and
in the same run, the sides taking turns:
  - bare:   the runtime round trip of `run_overhead.py` (the same runner and context), the
            yardstick;
  - direct: the `openai` client streaming from the server, until its first text chunk;
  - host:   an agent of type `builtin:llm-agent` run through the orchestrator (in process),
            until its first `message.delta`.
The host's added time to first token is median(host) - median(direct).

    .venv/bin/python bench/llm_overhead.py [--runs 200]

The last line reads `llm: added_ttft_ratio=X` (added time / bare round trip median).
"""

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from run_overhead import WARMUP, bare_round_trip, echo_runtime, percentile, setup_django

BUDGET = 0.5


async def first_token_time(stream) -> float:
    """Seconds until the stream's first token; the rest is read too (a whole call)."""
    started = time.perf_counter()
    first = None
    async for is_token in stream:
        if first is None and is_token:
            first = time.perf_counter() - started
    return first


async def main(runs: int, data_dir: Path) -> None:
    import openai
    from asgiref.sync import sync_to_async

    from accounts.models import Project, User
    from runners.conversations import services as door
    from runners.conversations.callers import Caller
    from runners.execution.orchestrator import Orchestrator
    from runners.models import (
        LLM_AGENT_RUNNER_ID,
        AgentInstance,
        AgentType,
        LLMModel,
        ModelProvider,
    )
    from runners.protocol import AgentEventEnvelope
    from tests.fake_providers import FakeProvider

    server = FakeProvider("openai").start()
    gateway = echo_runtime(data_dir)
    try:
        await gateway.discover()
        owner = await User.objects.acreate(email="bench@example.com")
        project = await Project.objects.acreate(name="Bench", slug="bench", owner=owner)
        provider = await ModelProvider.objects.acreate(name="fake", kind="openai",
                                                       base_url=server.base_url)
        await LLMModel.objects.acreate(name="bench-model", provider=provider,
                                       upstream_model="bench-upstream")
        agent_type = await AgentType.objects.acreate(
            name="Bencher", slug="bencher", runner_id=LLM_AGENT_RUNNER_ID,
            personality_prompt="Answer.", primary_model="bench-model")
        agent = await AgentInstance.objects.select_related("agent_type").aget(
            pk=(await AgentInstance.objects.acreate(name="b", project=project,
                                                    agent_type=agent_type)).pk)
        # The binding the door prepares for a message to this agent (once: the benchmark
        # measures the run, not the request's checks).
        prepared = await sync_to_async(door.prepare_agent_run)(
            Caller.operator(), agent_id=agent.pk, event_input={"text": "bench"})
        agent_binding = prepared.binding
        orchestrator = Orchestrator(gateway)

        bare_run = await bare_round_trip(gateway)

        async def bare():
            started = time.perf_counter()
            await bare_run()
            return time.perf_counter() - started

        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="bench", max_retries=0)

        async def direct_tokens():
            stream = await client.chat.completions.create(
                model="bench-upstream", stream=True,
                messages=[{"role": "system", "content": "Answer."},
                          {"role": "user", "content": "bench"}])
            async for chunk in stream:
                yield bool(chunk.choices and chunk.choices[0].delta.content)

        async def host_tokens():
            event = AgentEventEnvelope(agent_id=str(agent.pk), project_id=str(project.pk),
                                       input={"text": "bench"})
            async for message in orchestrator.run(event, agent_binding, agent_name="Bencher"):
                yield message.type == "message.delta"

        sides = {"bare": bare, "direct": lambda: first_token_time(direct_tokens()),
                 "host": lambda: first_token_time(host_tokens())}
        for measure in sides.values():
            for _ in range(WARMUP):
                await measure()
        samples = {name: [] for name in sides}
        for _ in range(runs):
            for name, measure in sides.items():
                samples[name].append(await measure())
        await client.close()
    finally:
        await gateway.stop()
        server.stop()

    for name, values in samples.items():
        label = "round trip" if name == "bare" else "first token"
        print(f"{name:>7}: {label} median {statistics.median(values) * 1000:.2f} ms, "
              f"p95 {percentile(values, 0.95) * 1000:.2f} ms")
    added = statistics.median(samples["host"]) - statistics.median(samples["direct"])
    ratio = added / statistics.median(samples["bare"])
    print(f"host adds {added * 1000:.2f} ms to the first token")
    print(f"budget: added_ttft_ratio <= {BUDGET}")
    print(f"llm: added_ttft_ratio={ratio:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="sequential runs per side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="langhost-bench-") as tmp:
        setup_django(Path(tmp))
        asyncio.run(main(args.runs, Path(tmp)))
