"""An agent type's guardrails (OpenAI Agents' input and output guardrails): checks of the
run's message before its runner starts, and of each reply before it is delivered. A check is
a list of `patterns` (regular expressions; one that matches trips it) or a `model` check (a
granted model reads the text with the check's `prompt` and answers PASS or BLOCK, then its
reason; the call is a model call of the run).

A tripped input guardrail ends the run before its runner starts (no model is asked), and
the message is withheld from the conversation's transcript (no later turn reads it); a
tripped output guardrail replaces the reply with a notice. Either ends the run failed,
`guardrail.tripped: <name>: <reason>`, and is recorded on the run (`guardrail.tripped`, with
the guardrail's name, its stage and reason).
"""

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import aclosing

from ledger.models import message_text
from ledger.services.conversations import withhold_message
from runners.execution.run import LocalRunHandle, RunState
from runners.protocol import runner_result
from runners.providers import load_calls_off_the_loop
from runners.providers.errors import ProviderError
from runners.providers.lookup import load_models

CODE = "guardrail.tripped"
# A text is checked against patterns up to this length, for at most this long.
MAX_CHECKED_CHARS = 100_000
PATTERN_SECONDS = 1.0
VERDICT = ("Read the text below as the check says, then answer with PASS or BLOCK on the "
           "first line and the reason on the second.")


class Guardrails:
    def __init__(self, rules: dict, state: RunState, handle: LocalRunHandle):
        self.rules, self.state, self.handle = rules, state, handle

    @classmethod
    def of_run(cls, state: RunState, handle: LocalRunHandle) -> "Guardrails | None":
        rules = state.binding.guardrails or {}
        return cls(rules, state, handle) if rules.get("input") or rules.get("output") else None

    async def _model_says_block(self, rule: dict, text: str) -> str | None:
        models = await load_models([rule["model"]])
        if not models:
            return f"its model '{rule['model']}' is not available"
        calls = await load_calls_off_the_loop()
        event = self.state.event
        call = calls.CallInfo(run_id=self.state.run_id, agent_id=event.agent_id or "",
                              project_id=event.project_id or "",
                              caller=f"guardrail:{rule['name']}", deadline=self.state.deadline,
                              journal=self.handle.journal_model_call)
        try:
            message, _ = await calls.invoke(models[0], [
                {"role": "system", "content": f"{rule['prompt']}\n\n{VERDICT}"},
                {"role": "user", "content": text}], call=call)
        except ProviderError as exc:  # a check that cannot answer does not let the text by
            return f"its model failed: {exc}"
        verdict, _, reason = message_text(message.get("content")).strip().partition("\n")
        return None if verdict.strip().upper().startswith("PASS") else (
            reason.strip() or verdict.strip() or "the model blocked it")

    async def tripped(self, stage: str, text: str) -> tuple[str, str] | None:
        """`(name, reason)` of the first guardrail of `stage` the text trips."""
        for rule in self.rules.get(stage) or []:
            if "patterns" in rule:
                reason = await _matching(rule["patterns"], text)
            else:
                reason = await self._model_says_block(rule, text)
            if reason:
                self.state.host_event(CODE, {"name": rule["name"], "stage": stage,
                                             "reason": reason})
                return rule["name"], reason
        return None

    def _failed(self, tripped: tuple[str, str]) -> dict:
        # No sequence: the host numbers it after whatever the runner sent.
        return runner_result(self.state.run_id, None, "run.failed", {
            "code": CODE, "error": f"{tripped[0]}: {tripped[1]}"})

    async def guarded(self, text: str, results: AsyncIterator[dict]) -> AsyncIterator[dict]:
        """The runner's results, its message checked first and each reply before it goes.
        With output guardrails, streamed text is held back: the whole reply is checked (a
        runner that only streams has its text checked as its reply at its end)."""
        output = bool(self.rules.get("output"))
        streamed = ""
        async with aclosing(results):
            if tripped := await self.tripped("input", text):
                await self.handle.written()
                await withhold_message(self.state.event.event_id,
                                       f"[withheld: guardrail {tripped[0]}]")
                yield self._failed(tripped)
                return
            async for result in results:
                data = result.get("data") if isinstance(result, dict) else None
                if not output or not isinstance(data, dict):
                    yield result
                    continue
                if result.get("type") == "message.delta":
                    streamed += (data.get("chunk") or {}).get("content") or ""
                    continue
                message = data.get("message")
                if result.get("type") == "run.completed" and message is None and streamed:
                    message = {"role": "assistant", "content": streamed}
                    result = {**result, "data": {**data, "message": message}}
                if result.get("type") in ("message.completed", "run.completed") and isinstance(
                        message, dict):
                    streamed = ""
                    if tripped := await self.tripped("output", message_text(message.get("content"))):
                        yield runner_result(self.state.run_id, None, "message.completed", {
                            "message": {"role": "assistant", "content": (
                                f"[withheld: guardrail {tripped[0]}]")}, "file_ids": []})
                        yield self._failed(tripped)
                        return
                yield result


async def _matching(patterns: list[str], text: str) -> str | None:
    """The reason a text trips a guardrail of patterns: the first that matches (on a thread,
    the text cut to MAX_CHECKED_CHARS, within PATTERN_SECONDS: a pattern that takes longer
    trips it too, and the loop goes on meanwhile)."""
    text = text[:MAX_CHECKED_CHARS]

    def first_match():
        return next((pattern for pattern in patterns if re.search(pattern, text)), None)

    try:
        async with asyncio.timeout(PATTERN_SECONDS):
            found = await asyncio.to_thread(first_match)
    except TimeoutError:
        return f"its patterns took over {PATTERN_SECONDS:.0f}s on the text"
    return f"it matches {found!r}" if found else None
