"""Answers with the first chat model granted to the run, streamed through the host."""

from __future__ import annotations

from langbot_plugin.api.definition.components.runner.runner import Runner
from langbot_plugin.api.entities.builtin.provider.message import Message, MessageChunk
from langbot_plugin.api.entities.builtin.runner import RunnerContext, RunnerResult
from langbot_plugin.api.entities.builtin.runner.errors import AgentAPIException


class ThinkerRunner(Runner):
    async def run(self, ctx: RunnerContext):
        # The host lists the models this run may call, in the binding's order (primary first).
        models = [m for m in ctx.resources.models if m.model_type == "chat"]
        if not models:
            yield RunnerResult.run_failed(
                ctx.run_id, "no chat model is granted to this run: give the binding a model",
                code="model.not_granted")
            return
        messages = []
        if ctx.context.available_apis.prompt_get:  # the agent's persona, when it has one
            messages = [Message.model_validate(item) for item in await ctx.get_prompt()]
        messages.append(Message(role="user", content=ctx.input.to_text() or ""))
        answer = ""
        try:
            async for chunk in ctx.api.invoke_llm_stream(models[0].model_id, messages):
                if chunk.content:
                    answer += chunk.content
                    yield RunnerResult.message_delta(
                        ctx.run_id, MessageChunk(role="assistant", content=chunk.content))
        except AgentAPIException as exc:  # refused, or the model failed: the host says why
            yield RunnerResult.run_failed(ctx.run_id, exc.error.message, code=exc.error.code)
            return
        yield RunnerResult.message_completed(ctx.run_id, Message(role="assistant", content=answer))
        yield RunnerResult.run_completed(ctx.run_id)
