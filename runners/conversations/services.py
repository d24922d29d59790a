"""The one door to every run.

Every way into a run — REST runs and messages, the conversation WebSocket, the playground,
the LangBot debug action, `manage.py run_agent` — asks this module. It decides, in this
order and before anything is written: may the caller see the agent (or run a runner
directly), is the conversation the caller's own, does the agent take messages (paused,
terminated), which agent of its tree answers, which binding and runner answer for it
(`runners.catalogue.bindings`), is that runner available. It raises a refusal from
`runners.conversations.exceptions` otherwise; each edge maps it to its own answer.

What it hands back is a `PreparedRun`; `execute(prepared)` then streams the run through the
orchestrator, with the agent `working` meanwhile.

Idempotency keys (`event_id`) and conversation ids belong to their caller: a key another
caller used is a different event, and a conversation id names only the caller's own
conversation with that agent.
"""

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.utils import timezone

from ledger import wire
from ledger.models import AgentRun, Conversation
from ledger.selectors import conversations as conversation_selectors
from ledger.selectors import runs as run_selectors
from ledger.services import conversations as conversation_services
from runners.catalogue import bindings
from runners.conversations import selectors
from runners.conversations.callers import Caller, idempotency_key, take_run_start
from runners.conversations.exceptions import (
    AgentPaused,
    AgentTerminated,
    AlreadyEnded,
    Forbidden,
    InvalidInput,
    NotFound,
    StorageFailed,
)
from runners.conversations.input import (
    ArtifactScope,
    InputFileError,
    Part,
    build_input,
    new_invocation_id,
)
from runners.conversations.targets import (
    answering_node,
    command_binding,
    message_text,
    multitask_strategy,
    node_binding,
    platform_event_data,
    require_available,
    require_no_answer,
    require_usage,
)
from runners.execution.orchestrator import Orchestrator
from runners.execution.run import RunMessage
from runners.models import AgentInstance, AgentType, Binding
from runners.plugins import registry
from runners.plugins.gateway import get_gateway
from runners.protocol import MESSAGE_EVENT, STEER, AgentBinding, AgentEventEnvelope, new_run_id
from runners.webhooks import services as webhooks
from runners.webhooks import worker as webhook_worker

logger = logging.getLogger(__name__)


# --- who is asking --------------------------------------------------------------------------


# --- what the door hands back ---------------------------------------------------------------

@dataclass
class PreparedRun:
    """A run the caller may start: its event, binding and who answers."""

    event: AgentEventEnvelope
    binding: AgentBinding
    run_id: str = field(default_factory=new_run_id)
    agent: AgentInstance | None = None
    agent_name: str = ""
    conversation: Conversation | None = None
    # The ids the caller knows: their own event key and conversation id.
    client_event_id: str | None = None
    # How the run ended, as the ledger recorded it then (set by `execute`).
    ended: dict | None = None
    # Where the run's outcome is POSTed when it ends (besides its agent type's and project's).
    webhook: str = ""
    # What the message does if its conversation has an active run (`MULTITASK_STRATEGIES`);
    # None: steer a run that takes it, else run beside.
    multitask: str | None = None
    # The run's row waits in its conversation already (adopted from a process gone away).
    queued: bool = False

    @property
    def public_conversation_id(self) -> str | None:
        if self.conversation is not None:
            return self.conversation.client_id
        return self.event.conversation_id

    @property
    def public_event_id(self) -> str:
        return self.client_event_id or self.event.event_id

    def public(self, outcome: dict) -> dict:
        """An outcome with the ids the caller knows in place of the ledger's."""
        outcome = dict(outcome)
        if outcome.get("event_id") == self.event.event_id:
            outcome["event_id"] = self.public_event_id
        if self.event.conversation_id and outcome.get("conversation_id") == self.event.conversation_id:
            outcome["conversation_id"] = self.public_conversation_id
        return outcome


# --- agent runs -----------------------------------------------------------------------------


def find_agent(caller: Caller, agent_id, project_id=None) -> AgentInstance:
    """The agent, if the caller may see it (else NotFound)."""
    agent = selectors.visible_agent(caller.user, agent_id, project_id)
    if agent is None:
        raise NotFound("Agent not found.", field="agent_id")
    return agent


def find_conversation(caller: Caller, agent: AgentInstance, conversation_id: str) -> Conversation:
    """The caller's own conversation with the agent (the operator may name any by its ledger
    id). Someone else's conversation is not found, whatever id names it."""
    if caller.user is None:
        conversation = conversation_selectors.by_ledger_id(conversation_id,
                                                           agent_id=str(agent.pk))
    else:
        conversation = conversation_selectors.get(conversation_id, user_id=str(caller.user.pk),
                                                  agent_id=str(agent.pk))
    if conversation is None:
        raise NotFound(f"Conversation '{conversation_id}' not found.", field="conversation_id")
    return conversation


def require_taking_messages(agent: AgentInstance) -> None:
    if agent.status == AgentInstance.Status.PAUSED:
        raise AgentPaused(f"Agent '{agent.name}' is paused; resume it to send messages.")
    if agent.status == AgentInstance.Status.TERMINATED:
        raise AgentTerminated(f"Agent '{agent.name}' is terminated; it takes no more messages.")


def prepare_agent_run(caller: Caller, *, agent_id, project_id=None,
                      conversation_id: str | None = None, parts: list[Part] | None = None,
                      event_input: dict | None = None, event_id: str | None = None,
                      timeout: float | None = None, source: str = "api",
                      artifact_url: str | None = None, event_type: str = MESSAGE_EVENT,
                      event_data: dict | None = None,
                      multitask: str | None = None) -> PreparedRun:
    """Everything before an agent answers: who may, which agent of its tree, which runner,
    and what the message does if its conversation has an active run (`multitask`: the
    request's strategy, if it names one).

    The input is either message `parts` (inline files saved as artifacts of the conversation)
    or an already built `event_input`.
    """
    require_no_answer(event_type, event_input)
    agent = find_agent(caller, agent_id, project_id)
    conversation = (find_conversation(caller, agent, conversation_id)
                    if conversation_id is not None else None)
    require_taking_messages(agent)
    take_run_start(caller)
    ledger_conversation = conversation.conversation_id if conversation else None
    tree, node = answering_node(agent, ledger_conversation)
    binding = node_binding(agent, tree, node, ledger_conversation, timeout)
    descriptor = require_available(binding.runner_id, event_type)
    strategy = (multitask_strategy(agent.agent_type, descriptor, multitask)
                if ledger_conversation and event_type == MESSAGE_EVENT else None)

    invocation_id = new_invocation_id()
    if parts is not None:
        event_input = _saved_input(caller, agent, conversation, parts, invocation_id,
                                   artifact_url)
    event_input = message_text(event_type, event_data, event_input)
    if command := command_binding(agent, binding, event_type, event_input,
                                  caller.is_superuser):
        binding, descriptor = command
        # A command never joins a run: asked to steer, it takes its turn as its type says.
        strategy = (multitask_strategy(agent.agent_type, descriptor,
                                       None if multitask == STEER else multitask)
                    if ledger_conversation else None)
    actor = caller.actor
    event = AgentEventEnvelope(
        event_id=event_id or invocation_id,
        idempotency_key=idempotency_key(caller, f"agent:{agent.pk}", event_id),
        conversation_id=ledger_conversation, project_id=str(agent.project_id),
        agent_id=str(agent.pk), actor=actor, input=event_input or {}, source=source,
        event_type=event_type,
        data=platform_event_data(descriptor, event_type, event_data,
                                 text=(event_input or {}).get("text"),
                                 event_id=event_id or invocation_id, actor=actor,
                                 conversation_id=ledger_conversation),
    )
    return PreparedRun(event=event, binding=binding, agent=agent, agent_name=node.name,
                       conversation=conversation, client_event_id=event_id,
                       multitask=strategy)


def _saved_input(caller, agent, conversation, parts, invocation_id, artifact_url) -> dict:
    if conversation is None:  # files are saved in a conversation; without one, sent inline
        save_blobs, scope = False, None
    else:
        save_blobs = agent.agent_type.save_input_blobs_as_artifacts
        scope = ArtifactScope(str(agent.project_id), conversation.user_id,
                              conversation.conversation_id)

    def url_for(name, version):
        return f"{artifact_url}/{quote(name, safe='')}?version={version}"

    try:
        return build_input(parts, invocation_id=invocation_id, scope=scope, save_blobs=save_blobs,
                           url_for=url_for if artifact_url else None)
    except InputFileError as exc:
        raise StorageFailed(str(exc)) from exc


# --- runner and binding runs ----------------------------------------------------------------

async def prepare_runner_run(caller: Caller, *, runner_id: str | None = None,
                       binding_id: str | None = None, event_input: dict | None = None,
                       event_id: str | None = None, conversation_id: str | None = None,
                       timeout: float | None = None, source: str = "api",
                       event_type: str | None = None, event_data: dict | None = None,
                       runner_config: dict | None = None,
                       binding_prefix: str = "api",
                       multitask: str | None = None) -> PreparedRun:
    """A run of a runner or a stored binding, named directly: superusers and the operator.

    Async, as its callers are: only a stored binding is read from the database, and the
    runner's descriptor usually comes from the registry's cache, so a run of a runner costs no
    thread hop here.
    """
    if not caller.is_superuser:
        raise Forbidden("Only superusers may run a runner or binding directly.")
    require_no_answer(event_type or MESSAGE_EVENT, event_input)
    if binding_id:
        stored = await Binding.objects.filter(binding_id=binding_id, enabled=True).afirst()
        if stored is None:
            raise InvalidInput("No enabled binding has this id.", field="binding_id")
        binding = bindings.to_protocol(stored)
        target = f"binding:{binding_id}"
    else:
        binding = AgentBinding(binding_id=f"{binding_prefix}:{runner_id}", runner_id=runner_id,
                               runner_config=runner_config or {},
                               state_policy={"state_scopes": ["conversation", "actor", "subject",
                                                              "runner"]})
        target = f"runner:{runner_id}"
    bindings.with_timeout(binding, timeout)
    try:
        descriptor = await registry.get_descriptor(binding.runner_id, get_gateway().discover)
    except registry.RunnerNotFound as exc:
        raise InvalidInput(str(exc), field="runner_id") from exc
    event_type = event_type or MESSAGE_EVENT
    require_usage(descriptor, event_type)
    # A runner named directly keeps today's way (steer, else beside) unless asked otherwise.
    strategy = (multitask_strategy(None, descriptor, multitask)
                if multitask and conversation_id and event_type == MESSAGE_EVENT else None)
    event_input = message_text(event_type, event_data, event_input)
    actor, event_id = caller.actor, event_id or f"evt-{uuid.uuid4()}"
    event = AgentEventEnvelope(
        event_id=event_id, event_type=event_type, conversation_id=conversation_id, actor=actor,
        idempotency_key=idempotency_key(caller, target, event_id), input=event_input or {},
        source=source, data=platform_event_data(
            descriptor, event_type, event_data, text=(event_input or {}).get("text"),
            event_id=event_id, actor=actor, conversation_id=conversation_id))
    return PreparedRun(event=event, binding=binding, client_event_id=event_id,
                       multitask=strategy)


# --- running it -----------------------------------------------------------------------------

@sync_to_async
def _mark_working(agent_pk) -> None:
    AgentInstance.objects.filter(
        pk=agent_pk, status__in=[AgentInstance.Status.IDLE, AgentInstance.Status.WORKING]
    ).update(status=AgentInstance.Status.WORKING, updated_at=timezone.now())


@sync_to_async
def _after_run(agent_pk, conversation_id: str | None) -> None:
    """Back to idle unless another run of the agent is still going; the conversation moved."""
    if not run_selectors.agent_is_busy(str(agent_pk)):
        AgentInstance.objects.filter(pk=agent_pk, status=AgentInstance.Status.WORKING).update(
            status=AgentInstance.Status.IDLE, updated_at=timezone.now())
    if conversation_id:
        conversation_services.touch(conversation_id)


async def execute(prepared: PreparedRun, wait_durable: bool = True,
                  announced: bool = False) -> AsyncIterator[RunMessage]:
    """Stream the run's delivered messages (see `Orchestrator.run` for `wait_durable` and
    `announced`: a caller that gave out the run id before it started); an agent is `working`
    meanwhile, then `idle` (also when the run fails or the caller goes away).
    Raises RunRefused if the run cannot start."""
    agent_pk = prepared.agent.pk if prepared.agent else None
    if agent_pk:
        await _mark_working(agent_pk)
    try:
        orchestrator = Orchestrator(get_gateway())
        async with aclosing(orchestrator.run(prepared.event, prepared.binding,
                                             run_id=prepared.run_id,
                                             agent_name=prepared.agent_name,
                                             wait_durable=wait_durable,
                                             multitask=prepared.multitask,
                                             queued=prepared.queued,
                                             announced=announced)) as messages:
            async for message in messages:
                yield message
        prepared.ended = orchestrator.outcomes.pop(prepared.run_id, None)
        if prepared.ended and prepared.ended.get("run_id") and _may_have_webhooks(prepared) \
                and await sync_to_async(_queue_webhooks)(prepared):
            webhook_worker.wake()
    finally:
        if agent_pk:
            await _after_run(agent_pk, prepared.event.conversation_id)


def _may_have_webhooks(prepared: PreparedRun) -> bool:
    """Whether the run's outcome could go anywhere: without its own URL, an agent (its type's)
    or a project (the project's), there is nothing to look up."""
    return bool(prepared.webhook or prepared.agent or prepared.event.project_id)


def _queue_webhooks(prepared: PreparedRun) -> int:
    """The run's outcome, on its way to its webhooks: its own, its agent type's, its
    project's."""
    agent_type_url = (AgentType.objects.filter(instances__pk=prepared.agent.pk).values_list(
        "webhook_url", flat=True).first() or "") if prepared.agent else ""
    return webhooks.queue_for_run(prepared.public(prepared.ended),
                                  prepared.event.project_id or "", prepared.webhook,
                                  agent_type_url)


async def outcome(prepared: PreparedRun, messages: list[dict] | None = None) -> dict:
    """How the run ended, with the caller's ids: `{run_id, status, status_reason, usage, ...}`.

    A message absorbed into an active run (steering) has no run of its own: it reports the
    run that took it.
    """
    if messages and messages[0]["type"] == "steering.queued":
        result = wire.steered_outcome(claimed_run_id=messages[0]["run_id"],
                                      event_id=prepared.event.event_id,
                                      conversation_id=prepared.event.conversation_id)
    else:
        # A replayed event has no outcome of its own run: the event id finds the earlier one.
        result = prepared.ended or await run_selectors.run_outcome_for_event(
            prepared.event.ledger_key)
    return prepared.public({**result, **({"messages": messages} if messages is not None else {})})


async def run_to_end(prepared: PreparedRun, announced: bool = False) -> dict:
    """Run and collect: the outcome with every delivered message (`announced`: as for
    `execute`)."""
    messages = [message.as_dict() async for message
                in execute(prepared, wait_durable=False, announced=announced)]
    return await outcome(prepared, messages)


# --- cancelling -----------------------------------------------------------------------------

@sync_to_async
def _run_seen_by(caller: Caller, run_id: str) -> AgentRun:
    runs = run_selectors.all_runs() if caller.user is None else selectors.visible_runs(caller.user)
    run = runs.filter(run_id=run_id).first()
    if run is None:
        raise NotFound(f"No run {run_id}.")
    return run


async def cancel(caller: Caller, run_id: str) -> AgentRun:
    """Cancel a run the caller sees, wherever it executes; the run as it is then. Someone
    else's run is not found; one that ended already is `AlreadyEnded`."""
    run = await _run_seen_by(caller, run_id)
    if run.is_terminal:
        raise AlreadyEnded(f"Run {run.run_id} already ended with status '{run.status}'.",
                           current_status=run.status)
    who = caller.user.email if caller.user is not None else "the operator"
    await Orchestrator.cancel(run.run_id, f"cancelled by {who}")
    await run.arefresh_from_db()
    return run
