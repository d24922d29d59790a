"""An agent type's guardrails (OpenAI Agents' input and output guardrails): checks of the
run's message before its runner starts, and of each reply before it is delivered. A check is
a list of `patterns` (regular expressions; one that matches trips it) or a `model` check (a
granted model reads the text with the check's `prompt` and answers PASS or BLOCK, then its
reason; the call is a model call of the run).

A tripped input guardrail ends the run before its runner starts (no model is asked); a
tripped output guardrail replaces the reply with a notice. Either ends the run failed,
`guardrail.tripped: <name>: <reason>`, and is recorded on the run (`guardrail.tripped`, with
the guardrail's name, its stage and reason).
"""

import re
from collections.abc import AsyncIterator
from contextlib import aclosing

from runners.execution.run import LocalRunHandle, RunState
from runners.protocol import runner_result
from runners.providers import load_calls_off_the_loop
from runners.providers.errors import ProviderError
from runners.providers.lookup import load_models

CODE = "guardrail.tripped"
VERDICT = ("Read the text below as the check says, then answer with PASS or BLOCK on the "
           "first line and the reason on the second.")


def _text(message) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else "".join(
        part.get("text") or "" for part in content or [] if isinstance(part, dict))


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
        verdict, _, reason = _text(message).strip().partition("\n")
        return None if verdict.strip().upper().startswith("PASS") else (
            reason.strip() or verdict.strip() or "the model blocked it")

    async def tripped(self, stage: str, text: str) -> tuple[str, str] | None:
        """`(name, reason)` of the first guardrail of `stage` the text trips."""
        for rule in self.rules.get(stage) or []:
            if "patterns" in rule:
                found = next((pattern for pattern in rule["patterns"]
                              if re.search(pattern, text)), None)
                reason = f"it matches {found!r}" if found else None
            else:
                reason = await self._model_says_block(rule, text)
            if reason:
                self.state.host_event(CODE, {"name": rule["name"], "stage": stage,
                                             "reason": reason})
                return rule["name"], reason
        return None

    def _failed(self, sequence: int, tripped: tuple[str, str]) -> dict:
        return runner_result(self.state.run_id, sequence, "run.failed", {
            "code": CODE, "error": f"{tripped[0]}: {tripped[1]}"})

    async def guarded(self, text: str, results: AsyncIterator[dict]) -> AsyncIterator[dict]:
        """The runner's results, its message checked first and each reply before it goes."""
        async with aclosing(results):
            if tripped := await self.tripped("input", text):
                yield self._failed(1, tripped)
                return
            async for result in results:
                data = result.get("data") if isinstance(result, dict) else None
                message = data.get("message") if isinstance(data, dict) else None
                if (result.get("type") in ("message.completed", "run.completed")
                        and isinstance(message, dict) and self.rules.get("output")):
                    if tripped := await self.tripped("output", _text(message)):
                        sequence = result.get("sequence") if isinstance(
                            result.get("sequence"), int) else 1
                        yield runner_result(self.state.run_id, sequence, "message.completed", {
                            "message": {"role": "assistant", "content": (
                                f"[withheld: guardrail {tripped[0]}]")}, "file_ids": []})
                        yield self._failed(sequence + 1, tripped)
                        return
                yield result
