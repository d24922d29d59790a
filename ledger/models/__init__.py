"""What happened: runs, their events, scoped state, transcripts and the inbound event log.

Table and column names follow the reference host's ledger so its SQL keeps working. The
ledger refers to runners, agents, projects and conversations by their id strings only.
Django finds the models here; each lives in the module of what it records.
"""

from ledger.models.conversations import (
    TRANSCRIPT_MAX_CHARS,
    AgentRunnerState,
    Artifact,
    Conversation,
    EventLog,
    Interaction,
    StateScope,
    SteeringItem,
    SteeringStatus,
    Transcript,
    entry_text,
    message_text,
)
from ledger.models.runs import (
    ACTIVE_STATUSES,
    GRANTS_KEPT,
    TERMINAL_STATUSES,
    AgentRun,
    AgentRunEvent,
    EventSource,
    RunGrants,
    RunQuerySet,
    RunStatus,
    shared_grants,
)
from ledger.models.usage import (
    AgentTotals,
    ModelCall,
    ModelCallDay,
    RunHour,
)

__all__ = [
    "ACTIVE_STATUSES",
    "AgentRun",
    "AgentRunEvent",
    "AgentRunnerState",
    "AgentTotals",
    "Artifact",
    "Conversation",
    "EventLog",
    "EventSource",
    "GRANTS_KEPT",
    "Interaction",
    "ModelCall",
    "ModelCallDay",
    "RunGrants",
    "RunHour",
    "RunQuerySet",
    "RunStatus",
    "StateScope",
    "SteeringItem",
    "SteeringStatus",
    "TERMINAL_STATUSES",
    "TRANSCRIPT_MAX_CHARS",
    "Transcript",
    "entry_text",
    "message_text",
    "shared_grants",
]
