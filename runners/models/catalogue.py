import uuid

from django.conf import settings
from django.db import models

from accounts.models import Project

DEFAULT_RUNNER_ID = "builtin:echo"
# The runner of a type created with a primary model and no runner of its own.
LLM_AGENT_RUNNER_ID = "builtin:llm-agent"
# The runner of a workflow type: it runs the type's sub-agents as its steps.
WORKFLOW_RUNNER_ID = "builtin:workflow"


class AgentKind(models.TextChoices):
    LLM = "llm", "LLM agent"
    WORKFLOW = "workflow", "Workflow agent"
    SEQUENTIAL = "sequential", "Sequential workflow: its sub-agents one after another"
    PARALLEL = "parallel", "Parallel workflow: its sub-agents at the same time, on one input"
    LOOP = "loop", "Loop workflow: its sub-agents in turn, again until one exits the loop"


class KnowledgeRetrieval(models.TextChoices):
    TOOL = "tool", "A search_knowledge tool the model calls"
    AUTO = "auto", "Search before each answer"


class MultitaskStrategy(models.TextChoices):
    """What a message does when its conversation has an active run."""

    AUTO = "", "Steer if the runner steers, else enqueue"
    ENQUEUE = "enqueue", "Enqueue: run once the active run ended"
    REJECT = "reject", "Reject: refuse the message"
    INTERRUPT = "interrupt", "Interrupt: cancel the active run, then run"
    STEER = "steer", "Steer: join the active run (runners that steer)"


class AgentType(models.Model):
    """A kind of agent in the catalogue: persona, models, and the runner that executes it.

    A type may have ordered sub-agent types (`SubAgent`): the tree an instance of it runs.
    Within one tree an agent is known by its `name` (unique per tree).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    description = models.TextField(
        blank=True, default="", max_length=10_000,
        help_text="What agents of this type do; agents of a tree read it to choose whom to "
                  "transfer to.")
    expertise = models.JSONField(default=list, blank=True,
                                 help_text='Topics it knows, as a JSON list: ["billing", "refunds"].')
    personality_prompt = models.TextField(
        blank=True, default="", max_length=50_000,
        help_text="The persona: the system prompt the built-in LLM agent starts from.")
    primary_model = models.CharField(
        max_length=200, blank=True, default="",
        help_text="The name of a registered model (Models in the admin) it thinks with; a "
                  "type created with a model and no runner runs the built-in LLM agent.")
    fallback_models = models.JSONField(
        default=list, blank=True,
        help_text='Models tried in order when the primary fails, as a JSON list: ["gpt-4o-mini"].')
    model_params = models.JSONField(
        default=dict, blank=True,
        help_text='Passed to the provider as they are, as a JSON object: {"temperature": 0.2}.')
    mcp_servers = models.JSONField(
        default=list, blank=True,
        help_text="Names of the MCP servers (MCP servers in the admin) whose tools it may use, "
                  "as a JSON list.")
    tools_requiring_approval = models.JSONField(
        default=list, blank=True, verbose_name="tools requiring approval",
        help_text="Names of tools the built-in LLM agent runs only once the user approved the "
                  "call (it asks through an interaction), as a JSON list.")
    knowledge_bases = models.JSONField(
        default=list, blank=True,
        help_text="Ids of the knowledge bases its agents search, as a JSON list; an agent is "
                  "granted only those of its own project.")
    knowledge_retrieval = models.CharField(
        max_length=16, choices=KnowledgeRetrieval.choices, default=KnowledgeRetrieval.AUTO,
        help_text="How the built-in LLM agent uses its knowledge bases: a search with each "
                  "message before the model answers, or a search_knowledge tool the model "
                  "calls.")
    webhook_url = models.URLField(
        blank=True, max_length=2000,
        help_text="Where every run of its agents reports how it ended (signed with the "
                  "project's webhook secret).")
    multitask_strategy = models.CharField(
        max_length=16, choices=MultitaskStrategy.choices, default=MultitaskStrategy.AUTO,
        blank=True, verbose_name="multitask strategy",
        help_text="What a message does while its conversation has an active run; a request "
                  "may name another.")
    skills = models.JSONField(
        default=list, blank=True,
        help_text="Names of the installed skills its agents may activate, as a JSON list.")
    box_enabled = models.BooleanField(
        default=False, verbose_name="sandbox box",
        help_text="Its agents work in their conversation's sandbox box: the built-in LLM agent "
                  "gets exec, read_file, write_file and list_files tools; a plugin runner the "
                  "box actions.")
    box_network = models.BooleanField(
        default=False, verbose_name="box network",
        help_text="Commands in its sandbox box may reach the network (never LangHost's own "
                  "ports); without it they have none.")
    is_active = models.BooleanField(default=True,
                                    help_text="Inactive types cannot be used for new agents.")
    runner_id = models.CharField(max_length=255, default=DEFAULT_RUNNER_ID,
                                 help_text="The runner its agents run: a built-in or a plugin's.")
    runner_config = models.JSONField(
        default=dict, blank=True,
        help_text="Values for the runner's own config fields (those its component declares), "
                  "as a JSON object; they win over what the type's models and persona fill in.")
    kind = models.CharField(max_length=16, choices=AgentKind.choices, default=AgentKind.LLM,
                            help_text="LLM agents may transfer turns; workflow agents may not.")
    disallow_transfer_to_parent = models.BooleanField(
        default=False, help_text="In a tree: never hand the turn back to its parent.")
    disallow_transfer_to_peers = models.BooleanField(
        default=False, help_text="In a tree: never hand the turn to its siblings.")
    save_input_blobs_as_artifacts = models.BooleanField(
        default=True,
        help_text="Save files sent inline in a message as conversation artifacts and hand the "
                  "runner a reference instead of the bytes.",
    )
    output_key = models.CharField(
        max_length=100, blank=True, default="",
        help_text="As a step of a workflow: the state key its reply is kept under, which later "
                  "steps' personas read as {key}.")
    output_schema = models.JSONField(
        null=True, blank=True, default=None,
        help_text="A JSON Schema its reply must match (the built-in LLM agent): the model is "
                  "asked for JSON of that shape, asked once more on a mismatch, and the run "
                  "fails output.invalid otherwise.")
    agent_tools = models.JSONField(
        default=list, blank=True,
        help_text="Agent types (ids) its agents may call like a function, with a request, to "
                  "get their reply; each call is a run of its own.")
    guardrails = models.JSONField(
        default=dict, blank=True,
        help_text='Checks of its runs\' message and replies: {"input": [...], "output": [...]}, '
                  'each {"name", "patterns": [regular expressions]} or {"name", "model", '
                  '"prompt"} (the model answers PASS or BLOCK). A tripped one ends the run '
                  "guardrail.tripped.")
    max_iterations = models.PositiveIntegerField(
        default=10, help_text="A loop workflow: the most times its steps run.")
    continue_on_step_failure = models.BooleanField(
        default=False, help_text="A parallel workflow: a step that fails leaves the others' "
                                 "replies as the workflow's, instead of failing it.")
    command_prefix = models.CharField(
        max_length=8, blank=True, default="!",
        help_text="A message starting with it and a plugin command's name (`!weather Paris`) "
                  "runs that command instead of the runner, as in LangBot; empty: no commands.")
    event_plugins = models.JSONField(
        null=True, blank=True, default=None,
        help_text='The plugins ("author/name") whose event listeners see this agent\'s '
                  "messages, prompts and replies, in this order; empty: none; unset: every "
                  "enabled plugin that listens, by priority, as LangBot's pipeline does.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class SubAgent(models.Model):
    """An ordered edge of agent trees: `child` is a sub-agent of `parent` at `position`."""

    parent = models.ForeignKey(AgentType, on_delete=models.CASCADE, related_name="sub_agent_links")
    child = models.ForeignKey(AgentType, on_delete=models.CASCADE, related_name="parent_links")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["parent_id", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["parent", "child"], name="unique_sub_agent"),
        ]

    def __str__(self):
        return f"{self.parent} → {self.child}"


class InvalidTransition(Exception):
    """An agent instance cannot move from its current status to the requested one."""

    def __init__(self, instance, action):
        self.current_status = instance.status
        super().__init__(f"Cannot {action} an agent whose status is '{instance.status}'.")


class AgentInstance(models.Model):
    """An agent of some type, spawned into a project."""

    class Status(models.TextChoices):
        IDLE = "idle"
        WORKING = "working"
        PAUSED = "paused"
        TERMINATED = "terminated"

    # action -> (statuses it may start from, status it leads to)
    TRANSITIONS = {
        "pause": ({Status.IDLE, Status.WORKING}, Status.PAUSED),
        "resume": ({Status.PAUSED}, Status.IDLE),
        "terminate": ({Status.IDLE, Status.WORKING, Status.PAUSED}, Status.TERMINATED),
    }

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="agents")
    agent_type = models.ForeignKey(AgentType, on_delete=models.PROTECT, related_name="instances")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IDLE)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]

    def __str__(self):
        return f"{self.name} ({self.agent_type})"

    def transition(self, action: str) -> None:
        """Apply `pause`, `resume` or `terminate`, or raise InvalidTransition."""
        allowed_from, target = self.TRANSITIONS[action]
        if self.status not in allowed_from:
            raise InvalidTransition(self, action)
        self.status = target
        self.save(update_fields=["status", "updated_at"])
