"""Evaluating an agent against an eval set (`runners.evals.evalset`): each case in a fresh
conversation with the agent, its turns sent through the door as the messages of whoever asked
for the evaluation (the operator at the command line, a superuser in the admin); each
turn's run checked against what the turn expects — the run completed, its reply (exact or
containing), the tools it called in order (its trajectory), a rubric graded by a judge model.
A case passes when every criterion of every turn does. The report is kept (`EvalReport`)."""

from dataclasses import asdict, dataclass

from asgiref.sync import sync_to_async
from django.utils import timezone

from ledger.models import message_text
from ledger.selectors.runs import tool_calls_of
from ledger.services import conversations as conversation_services
from runners.conversations import services as door
from runners.conversations import targets
from runners.conversations.callers import Caller
from runners.conversations.exceptions import Refused
from runners.evals.evalset import EvalSet, EvalSetError, Expect
from runners.evals.models import EvalReport
from runners.models import AgentInstance
from runners.protocol import RunRefused
from runners.providers.errors import ProviderError
from runners.providers.lookup import load_models

JUDGE_PROMPT = ("You grade an AI agent's reply against a rubric. Answer PASS or FAIL on the "
                "first line, then one short sentence saying why.")


@dataclass
class Criterion:
    name: str
    passed: bool
    detail: str = ""


async def evaluate(agent: AgentInstance, evalset: EvalSet, judge_model: str | None = None,
                   caller: Caller | None = None) -> EvalReport:
    """Run every case of `evalset` against `agent` as `caller` (the operator unless given); the
    report, stored. `judge_model` (else the eval set's) grades the rubrics. Raises EvalSetError
    when a rubric has no judge."""
    caller = caller or Caller.operator()
    judge = await _judge(evalset, judge_model or evalset.judge_model)
    started = timezone.now()
    cases = [await _case(agent, case, judge, caller) for case in evalset.cases]
    passed = sum(case["passed"] for case in cases)
    report = {"evalset": evalset.name, "agent_id": str(agent.pk), "agent": agent.name,
              "judge_model": judge.name if judge else None, "started_at": started.isoformat(),
              "passed": passed, "failed": len(cases) - passed, "cases": cases}
    return await EvalReport.objects.acreate(agent=agent, evalset_name=evalset.name,
                                            passed=passed, failed=len(cases) - passed,
                                            report_json=report)


async def _judge(evalset: EvalSet, name: str | None):
    if not evalset.needs_judge:
        return None
    if not name:
        raise EvalSetError("judge_model: a rubric needs a judge model (the eval set's "
                           "`judge_model`, or --judge)")
    models = await load_models([name])
    if not models:
        raise EvalSetError(f"judge_model: no model named {name!r}")
    return models[0]


def _open_conversation(agent: AgentInstance, case_name: str, caller: Caller):
    return conversation_services.create(
        project_id=str(agent.project_id), agent_id=str(agent.pk),
        user_id=str(caller.user.pk) if caller.user else "",
        title=f"eval: {case_name}"[:200], identity=targets.state_identity(agent))


async def _case(agent: AgentInstance, case, judge, caller: Caller) -> dict:
    conversation = await sync_to_async(_open_conversation)(agent, case.name, caller)
    turns = []
    for turn in case.turns:
        try:
            prepared = await sync_to_async(door.prepare_agent_run)(
                caller, agent_id=str(agent.pk),
                conversation_id=conversation.conversation_id,
                event_input={"text": turn.user}, source="system")
            outcome = await door.run_to_end(prepared)
        except (Refused, RunRefused) as exc:
            outcome = {"run_id": None, "status": "refused", "status_reason": str(exc),
                       "messages": []}
        reply = _reply(outcome.get("messages") or [])
        called = await sync_to_async(tool_calls_of)(outcome["run_id"]) \
            if outcome.get("run_id") else []
        criteria = [Criterion("run completed", outcome["status"] == "completed",
                              "" if outcome["status"] == "completed"
                              else f"{outcome['status']}: {outcome.get('status_reason') or ''}")]
        criteria += await _checks(turn.expect, turn.user, reply, called, judge, agent)
        turns.append({"user": turn.user, "run_id": outcome.get("run_id"),
                      "status": outcome["status"], "reply": reply,
                      "tool_calls": [{"name": name, "arguments": arguments}
                                     for name, arguments in called],
                      "criteria": [asdict(criterion) for criterion in criteria]})
    return {"name": case.name, "conversation_id": conversation.conversation_id,
            "passed": all(c["passed"] for t in turns for c in t["criteria"]), "turns": turns}


def _reply(messages: list[dict]) -> str:
    """The run's reply: its last completed message's text, or its streamed text."""
    completed = [m for m in messages if m.get("type") == "message.completed"]
    if completed:
        message = (completed[-1].get("data") or {}).get("message") or {}
        return message_text(message.get("content"))
    return "".join(((m.get("data") or {}).get("chunk") or {}).get("content") or ""
                   for m in messages if m.get("type") == "message.delta")


async def _checks(expect: Expect, user: str, reply: str, called: list, judge,
                  agent: AgentInstance) -> list[Criterion]:
    checks = []
    if expect.reply_exact is not None:
        checks.append(Criterion("reply is exactly", reply.strip() == expect.reply_exact.strip(),
                                f"replied {reply[:200]!r}"))
    for needle in expect.reply_contains or []:
        checks.append(Criterion(f"reply contains {needle!r}", needle in reply,
                                "" if needle in reply else f"replied {reply[:200]!r}"))
    if expect.tool_calls is not None:
        names = [call.name for call in expect.tool_calls]
        matched = [name for name, _ in called] == names and all(
            call.arguments is None or call.arguments == arguments
            for call, (_, arguments) in zip(expect.tool_calls, called, strict=False))
        checks.append(Criterion(f"tool calls {names}", matched,
                                "" if matched else f"called {[n for n, _ in called]}"))
    if expect.rubric:
        checks.append(await _graded(judge, expect.rubric, user, reply, agent))
    return checks


async def _graded(judge, rubric: str, user: str, reply: str, agent: AgentInstance) -> Criterion:
    # The providers' SDKs load on first use, not with the admin that imports this module.
    from runners.providers import calls

    name = f"rubric: {rubric[:60]}"
    try:
        message, _ = await calls.invoke(judge, [
            {"role": "system", "content": JUDGE_PROMPT},
            {"role": "user", "content": f"Rubric: {rubric}\n\nThe user said: {user}\n\n"
                                        f"The agent replied: {reply}"}],
            call=calls.CallInfo(agent_id=str(agent.pk), project_id=str(agent.project_id),
                                caller="eval:judge"))
    except ProviderError as exc:
        return Criterion(name, False, f"the judge could not answer: {exc}")
    verdict = message_text(message.get("content")).strip()
    return Criterion(name, verdict.upper().startswith("PASS"), verdict[:300])
