"""Streams the input back word by word; remembers how many turns the conversation had."""

from __future__ import annotations

from langbot_plugin.api.definition.components.runner.runner import Runner
from langbot_plugin.api.entities.builtin.provider.message import Message, MessageChunk
from langbot_plugin.api.entities.builtin.runner import RunnerContext, RunnerResult


class EchoRunner(Runner):
    async def run(self, ctx: RunnerContext):
        text = ctx.input.to_text() or ""
        turns = int(ctx.state.conversation.get("examples.turns") or 0) + 1
        so_far = ""
        for word in text.split():
            so_far = f"{so_far} {word}".strip()
            yield RunnerResult.message_delta(
                ctx.run_id, MessageChunk(role="assistant", content=f"{word} ", all_content=so_far)
            )
        yield RunnerResult.message_completed(
            ctx.run_id, Message(role="assistant", content=f"{text} (turn {turns})")
        )
        yield RunnerResult.state_updated(ctx.run_id, "examples.turns", turns, scope="conversation")
        yield RunnerResult.run_completed(ctx.run_id)
