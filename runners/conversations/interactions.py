"""Answering a run's question (`runners.execution.interactions`): through the one door.

Only the conversation's own user may answer (anyone else is told it does not exist), once,
before it expires, with values the question allows. The answer starts a run of the agent
that asked, the same runner, with `event_type: interaction.submitted` and the answer as
`input.interaction`; it waits its turn behind the conversation's active run.
"""

import hmac
import time
import uuid

from django.utils import timezone
from langbot_plugin.api.entities.builtin.runner.interaction import (
    INTERACTION_SUBMITTED_EVENT,
    InteractionRequest,
)

from ledger.models import Interaction
from ledger.selectors import interactions as selectors
from ledger.services import interactions as ledger
from runners.catalogue.agent_routing import find_agent
from runners.catalogue.trees import build_tree
from runners.conversations import services as door
from runners.conversations import targets
from runners.conversations.callers import Caller, idempotency_key, take_run_start
from runners.conversations.exceptions import AlreadyAnswered, Expired, InvalidInput, NotFound
from runners.execution.interactions import token_hash
from runners.protocol import ENQUEUE, AgentEventEnvelope, new_run_id

MAX_VALUE_CHARS = 20_000


def prepare_answer(caller: Caller, *, agent_id, project_id=None, conversation_id: str,
                   interaction_id: str, token: str | None = None, action_id: str | None = None,
                   values: dict | None = None, source: str = "api") -> door.PreparedRun:
    """The run an answer starts, the answer recorded (nothing is, when refused). A `token`
    given must be the question's; a signed-in owner of the conversation may answer
    without."""
    agent = door.find_agent(caller, agent_id, project_id)
    conversation = door.find_conversation(caller, agent, conversation_id)
    interaction = selectors.find(conversation.conversation_id, interaction_id)
    if interaction is None or (token is not None and not hmac.compare_digest(
            token_hash(token), interaction.token_hash)):
        raise NotFound(f"Interaction '{interaction_id}' not found.", field="interaction_id")
    if interaction.status != Interaction.Status.PENDING:
        raise AlreadyAnswered(f"Interaction '{interaction_id}' was answered already.")
    if interaction.expires_at <= timezone.now():
        raise Expired(f"Interaction '{interaction_id}' expired at "
                      f"{interaction.expires_at.isoformat()}.")
    submission = {"interaction_id": interaction.interaction_id, "action_id": action_id,
                  "values": checked_values(InteractionRequest.model_validate(
                      interaction.request_json), action_id, values or {}),
                  "submitted_at": int(time.time())}
    door.require_taking_messages(agent)
    take_run_start(caller)
    tree = build_tree(agent.agent_type)
    node = find_agent(tree.root, interaction.agent_name) or tree.root
    binding = targets.node_binding(agent, tree, node, conversation.conversation_id)
    targets.require_runner(binding.runner_id)  # the runner that asked takes the answer
    event_id = f"evt-{uuid.uuid4()}"
    event = AgentEventEnvelope(
        event_id=event_id, event_type=INTERACTION_SUBMITTED_EVENT,
        idempotency_key=idempotency_key(caller, f"agent:{agent.pk}", event_id),
        conversation_id=conversation.conversation_id, project_id=str(agent.project_id),
        agent_id=str(agent.pk), actor=caller.actor, source=source,
        input={"text": summary(interaction, submission), "interaction": submission},
        data={"type": INTERACTION_SUBMITTED_EVENT, "interaction_id": interaction_id,
              "asked_by_run_id": interaction.run_id})
    prepared = door.PreparedRun(event=event, binding=binding, run_id=new_run_id(),
                                agent=agent, agent_name=node.name, conversation=conversation,
                                multitask=ENQUEUE)
    if not ledger.claim_sync(interaction.pk, submission, prepared.run_id):
        raise AlreadyAnswered(f"Interaction '{interaction_id}' was answered already.")
    return prepared


def checked_values(request: InteractionRequest, action_id: str | None, values: dict) -> dict:
    """The answer's values, if the question allows them: its fields only, the required ones
    given, each of its type and among its options; the action one of its actions."""
    if request.actions and action_id not in {action.id for action in request.actions}:
        raise InvalidInput(f"action_id must be one of {[a.id for a in request.actions]}.",
                           field="action_id")
    if not isinstance(values, dict):
        raise InvalidInput("values must be an object.", field="values")
    fields = {field.id: field for field in request.fields}
    unknown = set(values) - set(fields)
    if unknown:
        raise InvalidInput(f"values has no field {sorted(unknown)}.", field="values")
    checked = {}
    for field in request.fields:
        value = values.get(field.id, field.default)
        if value is None or value == "" or value == []:
            if field.required:
                raise InvalidInput(f"'{field.label}' is required.", field=f"values.{field.id}")
            continue
        checked[field.id] = _checked(field, value)
    return checked


def _checked(field, value):
    allowed = {option.value for option in field.options}
    name = f"values.{field.id}"
    if field.type == "boolean" and not isinstance(value, bool):
        raise InvalidInput(f"'{field.label}' must be true or false.", field=name)
    if field.type == "number" and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise InvalidInput(f"'{field.label}' must be a number.", field=name)
    if field.type in ("text", "textarea", "select", "file") and (
            not isinstance(value, str) or len(value) > MAX_VALUE_CHARS):
        raise InvalidInput(f"'{field.label}' must be text of at most {MAX_VALUE_CHARS} "
                           "characters.", field=name)
    if field.type == "multiselect" and not (
            isinstance(value, list) and all(isinstance(item, str) for item in value)):
        raise InvalidInput(f"'{field.label}' must be a list of options.", field=name)
    chosen = value if field.type == "multiselect" else [value]
    if field.type in ("select", "multiselect") and allowed and not set(chosen) <= allowed:
        raise InvalidInput(f"'{field.label}' must be among {sorted(allowed)}.", field=name)
    return value


def summary(interaction: Interaction, submission: dict) -> str:
    """The answer as one line of text, for runners (and people) that read only text."""
    parts = [f"{key}={value}" for key, value in submission["values"].items()]
    if submission.get("action_id"):
        parts.insert(0, submission["action_id"])
    return f"{interaction.title}: {', '.join(parts) or 'answered'}"
