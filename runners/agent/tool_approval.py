"""Tools that run only once the user approved them (an agent type's `requires_approval`).

When the model calls such a tool, the built-in LLM agent asks through an interaction (a
confirmation: approve or refuse) and ends its run, keeping what the model said so far in the
conversation's state (`host.pending_approval`). The answer starts the next run, which picks
the calls up where they were: approved, they run; refused, the model reads that the user
refused and answers on.
"""

from langbot_plugin.api.entities.builtin.runner.interaction import (
    INTERACTION_REQUESTED_ACTION,
    INTERACTION_SUBMITTED_EVENT,
)

STATE_SCOPE = "conversation"
STATE_KEY = "host.pending_approval"
APPROVE, REFUSE = "approve", "refuse"
REFUSED = "the user refused to run this tool"


def needing_approval(config: dict, asked: dict[str, dict]) -> list[str]:
    """The names of the asked tools the agent type runs only with approval."""
    marked = set(config.get("requires_approval") or [])
    return sorted({entry["name"] for entry in asked.values() if entry["name"] in marked})


def request(run_id: str, names: list[str], asked: dict[str, dict]) -> dict:
    """The `action.requested` data asking the user to approve the calls."""
    shown = "\n".join(f"- {entry['name']}({entry['arguments'] or '{}'})"
                      for entry in asked.values() if entry["name"] in names)
    return {"action": INTERACTION_REQUESTED_ACTION, "target": {}, "payload": {
        "interaction_id": f"approve-{run_id}", "kind": "confirmation",
        "title": f"Allow the agent to run {', '.join(names)}?",
        "description": f"The agent wants to call:\n{shown}",
        "actions": [{"id": APPROVE, "label": "Approve", "style": "primary"},
                    {"id": REFUSE, "label": "Refuse", "style": "danger"}],
        "fallback_text": f"Reply to approve or refuse running {', '.join(names)}.",
    }}


def saved(run_id: str, agent: str, messages: list[dict], asked: dict[str, dict],
          names: list[str]) -> dict:
    """The `state.updated` data that keeps the waiting calls for the answer's run."""
    return {"scope": STATE_SCOPE, "key": STATE_KEY, "value": {
        "interaction_id": f"approve-{run_id}", "agent": agent, "messages": messages,
        "calls": asked, "needing_approval": names}}


def cleared() -> dict:
    return {"scope": STATE_SCOPE, "key": STATE_KEY, "value": None}


def answered(context: dict) -> dict | None:
    """The waiting calls this run answers, with `refused`: the names the user refused (none
    when approved); None when the run answers no approval."""
    if (context.get("event") or {}).get("event_type") != INTERACTION_SUBMITTED_EVENT:
        return None
    pending = ((context.get("state") or {}).get(STATE_SCOPE) or {}).get(STATE_KEY)
    answer = (context.get("input") or {}).get("interaction") or {}
    if not isinstance(pending, dict) or pending.get("interaction_id") != answer.get(
            "interaction_id"):
        return None
    approved = answer.get("action_id") == APPROVE
    return {**pending, "refused": [] if approved else pending.get("needing_approval") or []}
