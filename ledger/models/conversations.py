"""Conversations and what they hold: scoped runner state, transcripts, the inbound event
log, steering items, artifacts and interactions."""


from django.db import models

from ledger.models.runs import AgentRun


class StateScope(models.TextChoices):
    CONVERSATION = "conversation"
    ACTOR = "actor"
    SUBJECT = "subject"
    RUNNER = "runner"


class AgentRunnerState(models.Model):
    runner_id = models.CharField(max_length=255)
    binding_identity = models.CharField(max_length=255)
    scope = models.CharField(max_length=16, choices=StateScope.choices)
    scope_key = models.CharField(max_length=512)
    state_key = models.CharField(max_length=255)
    value_json = models.JSONField(null=True)
    conversation_id = models.CharField(max_length=255, blank=True, default="")
    thread_id = models.CharField(max_length=255, blank=True, default="")
    actor_type = models.CharField(max_length=64, blank=True, default="")
    actor_id = models.CharField(max_length=255, blank=True, default="")
    subject_type = models.CharField(max_length=64, blank=True, default="")
    subject_id = models.CharField(max_length=255, blank=True, default="")
    project_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "agent_runner_state"
        ordering = ["scope_key", "state_key"]
        constraints = [
            models.UniqueConstraint(fields=["scope_key", "state_key"], name="agent_runner_state_key")
        ]

    def __str__(self):
        return f"{self.scope}:{self.state_key}"


# A transcript entry's `content` is its text for pages and search, cut past this many
# characters (with a marker that says so); `content_json` keeps the whole message.
TRANSCRIPT_MAX_CHARS = 4000


def message_text(content) -> str:
    """Plain text of a message's content: a string, or the text parts of a list,
    space-joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content
                        if isinstance(part, dict) and part.get("text"))
    return ""


def entry_text(content: str, content_json) -> str:
    """An entry's whole text: its `content`, or, when that was cut, its message's."""
    if len(content) <= TRANSCRIPT_MAX_CHARS or not isinstance(content_json, dict):
        return content
    return message_text(content_json.get("content")) or content


class Transcript(models.Model):
    """One row per user message and per run's first completed assistant message."""

    conversation_id = models.CharField(max_length=255, db_index=True)
    thread_id = models.CharField(max_length=255, blank=True, default="")
    project_id = models.CharField(max_length=64, blank=True, default="")
    event_id = models.CharField(max_length=255, blank=True, default="", db_index=True)
    run_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    runner_id = models.CharField(max_length=255, blank=True, default="")
    role = models.CharField(max_length=16)
    # The agent (or "user") that wrote the entry; agent-tree routing reads it.
    author = models.CharField(max_length=255, blank=True, default="")
    item_type = models.CharField(max_length=32, default="message")
    content = models.TextField(blank=True, default="")
    content_json = models.JSONField(default=dict, blank=True)
    attachment_refs = models.JSONField(default=list, blank=True)
    metadata_json = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "transcript"
        ordering = ["id"]

    def __str__(self):
        return f"{self.conversation_id}#{self.pk} {self.role}"

    @property
    def full_text(self) -> str:
        return entry_text(self.content, self.content_json)

    @property
    def citations(self) -> list[dict]:
        """The passages a reply was written from (`provider_specific_fields.citations` of the
        message: document, chunk, page, score), numbered as it cites them."""
        fields = (self.content_json or {}).get("provider_specific_fields") or {}
        citations = fields.get("citations") if isinstance(fields, dict) else None
        return citations if isinstance(citations, list) else []

    @property
    def files(self) -> list[dict]:
        """The files a message links to (`file_url` parts: `file_name`, `file_url`)."""
        content = (self.content_json or {}).get("content")
        return [part for part in content if isinstance(part, dict)
                and part.get("type") == "file_url" and part.get("file_url")] \
            if isinstance(content, list) else []


class EventLog(models.Model):
    """One row per inbound event. `event_id` is the event's id as its sender gave it;
    `idempotency_key` is that id made the sender's own, and makes a replay run nothing."""

    event_id = models.CharField(max_length=255, db_index=True)
    idempotency_key = models.CharField(max_length=255, unique=True)
    event_type = models.CharField(max_length=128)
    source = models.CharField(max_length=64, blank=True, default="")
    run_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    runner_id = models.CharField(max_length=255, blank=True, default="")
    conversation_id = models.CharField(max_length=255, blank=True, default="", db_index=True)
    thread_id = models.CharField(max_length=255, blank=True, default="")
    project_id = models.CharField(max_length=64, blank=True, default="")
    actor_type = models.CharField(max_length=64, blank=True, default="")
    actor_id = models.CharField(max_length=255, blank=True, default="")
    subject_type = models.CharField(max_length=64, blank=True, default="")
    subject_id = models.CharField(max_length=255, blank=True, default="")
    input_summary = models.CharField(max_length=1000, blank=True, default="")
    input_json = models.JSONField(null=True, blank=True)
    metadata_json = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "event_log"
        ordering = ["-id"]

    def __str__(self):
        return f"{self.event_id} {self.event_type}"

    def save(self, *args, **kwargs):
        self.idempotency_key = self.idempotency_key or self.event_id  # an event of no caller's
        super().save(*args, **kwargs)


class SteeringStatus(models.TextChoices):
    QUEUED = "queued"
    INJECTED = "injected"
    DROPPED = "dropped"


class SteeringItem(models.Model):
    """A message absorbed into an active run; the runner pulls it with `steering_pull`."""

    run = models.ForeignKey(
        AgentRun, to_field="run_id", db_column="run_id", on_delete=models.CASCADE,
        related_name="steering_items",
    )
    event_id = models.CharField(max_length=255)
    item_json = models.JSONField(default=dict)
    status = models.CharField(
        max_length=16, choices=SteeringStatus.choices, default=SteeringStatus.QUEUED
    )
    reason = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "steering_item"
        ordering = ["id"]

    def __str__(self):
        return f"{self.event_id} -> {self.run_id} ({self.status})"


class Conversation(models.Model):
    """A user's session with one agent instance. Its entries are the `transcript` rows with
    its `conversation_id`; its state lives in `agent_runner_state` (see
    ledger.services.conversations).

    Two ids: `client_id` is the one its owner uses in the API, unique only per agent and owner
    (so an id never tells one user that another has it); `conversation_id` is unique across
    LangHost and is what the ledger (runs, transcript, state, artifacts) and runners see.
    """

    conversation_id = models.CharField(max_length=128, unique=True)
    client_id = models.CharField(max_length=128)
    project_id = models.CharField(max_length=64, db_index=True)
    agent_id = models.CharField(max_length=64)
    user_id = models.CharField(max_length=64)
    title = models.CharField(max_length=200, blank=True, default="")
    # A fork's origin: the conversation (its `conversation_id`) and the entry it started as of.
    forked_from = models.CharField(max_length=128, blank=True, default="", db_index=True)
    forked_at_entry = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The time of the last entry (or of the creation).
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "conversation"
        ordering = ["-updated_at", "-id"]
        # An owner's list, latest activity first, a keyset page at a time.
        indexes = [models.Index(fields=["agent_id", "user_id", "updated_at", "id"],
                                name="conversation_by_activity")]
        constraints = [
            models.UniqueConstraint(fields=["agent_id", "user_id", "client_id"],
                                    name="conversation_client_id_per_owner"),
        ]

    def __str__(self):
        return self.client_id


class Artifact(models.Model):
    """One version of a named file of a (project, user, conversation).

    `conversation_id` is empty for user-scoped names (`user:` prefix): those are shared by all
    of that user's conversations in the project. The bytes live in the `artifacts` storage.
    """

    project_id = models.CharField(max_length=64)
    user_id = models.CharField(max_length=64)
    conversation_id = models.CharField(max_length=128, blank=True, default="")
    name = models.CharField(max_length=255)
    version = models.PositiveIntegerField()
    mime_type = models.CharField(max_length=255, default="application/octet-stream")
    size = models.BigIntegerField(default=0)
    sha256 = models.CharField(max_length=64)
    storage_path = models.CharField(max_length=512)
    custom_metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "artifact"
        ordering = ["project_id", "user_id", "conversation_id", "name", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["project_id", "user_id", "conversation_id", "name", "version"],
                name="artifact_version_unique",
            )
        ]

    def __str__(self):
        return f"{self.name} v{self.version}"


class Interaction(models.Model):
    """A question a run asked a person (LangBot's `interaction.requested`): a form, a
    confirmation or a choice, answered once before it expires. The answer starts a run of the
    same runner (`interaction.submitted`). Only the hash of its one-time token is kept."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SUBMITTED = "submitted"

    run_id = models.CharField(max_length=64, db_index=True,
                              help_text="The run that asked.")
    interaction_id = models.CharField(max_length=255, help_text="The runner's id for it.")
    conversation_id = models.CharField(max_length=255)
    project_id = models.CharField(max_length=64, blank=True, default="")
    agent_id = models.CharField(max_length=64, blank=True, default="")
    runner_id = models.CharField(max_length=255)
    agent_name = models.CharField(max_length=200, blank=True, default="")
    kind = models.CharField(max_length=16)
    title = models.CharField(max_length=1000)
    request_json = models.JSONField(help_text="The request as the runner sent it.")
    token_hash = models.CharField(max_length=64)
    expires_at = models.DateTimeField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    submission_json = models.JSONField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    resume_run_id = models.CharField(max_length=64, blank=True, default="",
                                     help_text="The run its answer started.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "interaction"
        ordering = ["-id"]
        indexes = [models.Index(fields=["conversation_id", "interaction_id"],
                                name="interaction_conversation")]

    def __str__(self):
        return f"{self.title} ({self.status})"
