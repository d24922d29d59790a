"""Pydantic models at the protocol edge: what enters a run (event, binding) and what leaves it.

Django models stay inside; these are built from requests and bindings, and validated once.
"""

import time
import uuid
from typing import Any, Literal

from langbot_plugin.api.entities.builtin.runner.interaction import InteractionSubmission
from pydantic import BaseModel, ConfigDict, Field, field_validator

from runners.models import MultitaskStrategy

# What LangHost calls itself to runners and models (LangBot's `langbot_version`, a
# model call's client name).
HOST_NAME = "langhost"
# The event a message is: what a conversation's messages start, LangBot's own type for it.
MESSAGE_EVENT = "message.received"
TRIGGER_SOURCES = {"platform", "webui", "api", "scheduler", "system", "host_adapter"}
STATE_SCOPES = ("conversation", "actor", "subject", "runner")
StateScopeName = Literal["conversation", "actor", "subject", "runner"]
ScopeType = Literal["global", "project", "agent", "conversation"]

# Most specific first: resolution takes the first level that has a binding.
SCOPE_PRECEDENCE: tuple[ScopeType, ...] = ("conversation", "agent", "project", "global")


class Actor(BaseModel):
    actor_type: str = "user"
    actor_id: str | None = None
    actor_name: str | None = None


class Subject(BaseModel):
    subject_type: str = "unknown"
    subject_id: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class Attachment(BaseModel):
    """Mirrors the SDK's InputAttachment (extra keys are forbidden there too)."""

    model_config = ConfigDict(extra="forbid")

    ref: str | None = None
    type: str | None = None
    mime_type: str | None = None
    size: int | None = None
    name: str | None = None
    source: str | None = None
    url: str | None = None
    path: str | None = None
    content: str | None = None
    id: str | None = None


class EventInput(BaseModel):
    text: str | None = Field(default=None, max_length=200_000)
    contents: list[dict[str, Any]] = Field(default_factory=list)
    attachments: list[Attachment] = Field(default_factory=list)
    # The answer to the run's question, when the event is `interaction.submitted`.
    interaction: InteractionSubmission | None = None

    @field_validator("contents")
    @classmethod
    def _typed_contents(cls, contents: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for index, part in enumerate(contents):
            if not isinstance(part.get("type"), str) or not part["type"]:
                raise ValueError(f"contents[{index}] needs a `type` (e.g. \"text\")")
        return contents


class Delivery(BaseModel):
    model_config = ConfigDict(extra="allow")

    surface: str = "api"
    supports_streaming: bool = True
    automatic_reply: bool = False
    max_message_size: int | None = None


class AgentEventEnvelope(BaseModel):
    """One inbound event, whatever door it came through (API, admin, command, debug)."""

    event_id: str = Field(default_factory=lambda: f"evt-{uuid.uuid4()}", min_length=1, max_length=255)
    event_type: str = Field(default="message.received", min_length=1, max_length=128)
    event_time: int = Field(default_factory=lambda: int(time.time()))
    source: str = "api"
    source_event_type: str | None = None
    conversation_id: str | None = Field(default=None, max_length=255)
    thread_id: str | None = Field(default=None, max_length=255)
    project_id: str | None = None
    agent_id: str | None = None
    actor: Actor = Field(default_factory=Actor)
    subject: Subject | None = None
    input: EventInput = Field(default_factory=EventInput)
    delivery: Delivery = Field(default_factory=Delivery)
    data: dict[str, Any] = Field(default_factory=dict)
    # The ledger's key for this event, which makes a replay of it run nothing: its id made
    # the caller's own (the same id from another caller is another event); default its id.
    # Not sent to runners.
    idempotency_key: str | None = Field(default=None, max_length=255)
    # The run this event's run is a step of (a workflow's step), if any.
    parent_run_id: str | None = Field(default=None, max_length=64)

    @property
    def ledger_key(self) -> str:
        return self.idempotency_key or self.event_id

    @property
    def trigger_source(self) -> str:
        return self.source if self.source in TRIGGER_SOURCES else "host_adapter"


class BindingScope(BaseModel):
    scope_type: ScopeType = "global"
    scope_id: str | None = None


class StatePolicy(BaseModel):
    enable_state: bool = True
    state_scopes: list[StateScopeName] = Field(default_factory=lambda: ["conversation", "actor"])


class DeliveryPolicy(BaseModel):
    enable_streaming: bool = True
    enable_reply: bool = True


class ResourcePolicy(BaseModel):
    allow_plugin_storage: bool = True
    allow_workspace_storage: bool = False
    allowed_model_uuids: list[str] | None = None
    allowed_tool_names: list[str] | None = None
    allowed_kb_uuids: list[str] | None = None


class AgentBinding(BaseModel):
    """Which runner answers for a scope, with its config and policies."""

    binding_id: str = Field(min_length=1, max_length=255)
    scope: BindingScope = Field(default_factory=BindingScope)
    runner_id: str = Field(min_length=1, max_length=255)
    runner_config: dict[str, Any] = Field(default_factory=dict)
    state_policy: StatePolicy = Field(default_factory=StatePolicy)
    delivery_policy: DeliveryPolicy = Field(default_factory=DeliveryPolicy)
    resource_policy: ResourcePolicy = Field(default_factory=ResourcePolicy)
    # The plugins whose event listeners hear the run ("author/name", in order): its agent
    # type's `event_plugins`; None for every enabled plugin that listens, [] for none.
    event_plugins: list[str] | None = None
    # Its agent type's guardrails (`runners.execution.guardrails`): `{input: [...],
    # output: [...]}`.
    guardrails: dict[str, Any] | None = None

    @field_validator("runner_config")
    @classmethod
    def _timeout_is_number_or_absent(cls, config: dict[str, Any]) -> dict[str, Any]:
        timeout = config.get("timeout")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
            raise ValueError("runner_config.timeout must be a number of seconds")
        return config

    @property
    def timeout_seconds(self) -> float | None:
        """`runner_config.timeout`, default 300 s; zero or negative means no deadline."""
        timeout = self.runner_config.get("timeout", 300)
        if timeout is None or timeout <= 0:
            return None
        return float(timeout)


class RunRefused(Exception):
    """The run could not start (unknown runner, bad binding); nothing was recorded."""


class ConversationBusy(RunRefused):
    """The conversation has an active run, `run_id`, and the message's strategy is `reject`."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        super().__init__(f"The conversation is busy with run {run_id}; its strategy rejects "
                         "another message meanwhile.")


# What a message does when its conversation has an active run: wait for it to end (enqueue),
# be refused (reject), cancel it and then run (interrupt), or join it (steer: for runners
# that declare steering).
ENQUEUE, REJECT, INTERRUPT, STEER = (MultitaskStrategy.ENQUEUE.value, MultitaskStrategy.REJECT.value,
                                     MultitaskStrategy.INTERRUPT.value, MultitaskStrategy.STEER.value)
MULTITASK_STRATEGIES = (ENQUEUE, REJECT, INTERRUPT, STEER)


def new_run_id() -> str:
    return str(uuid.uuid4())


def runner_result(run_id: str, sequence: int, type_: str, data: dict,
                  usage: dict | None = None) -> dict:
    """One result as a runner sends it (the SDK's `RunnerResult`, as a dict), for the runners
    that run in LangHost's process and the replies of plugin commands."""
    return {"run_id": run_id, "type": type_, "data": data, "usage": usage,
            "sequence": sequence, "timestamp": int(time.time())}
