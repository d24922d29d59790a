"""The runners app's models, one module per concern; re-exported here so the app label,
`runners.models.X` references and the migrations stay as they were."""

from runners.models.bindings import (
    Binding,
    default_delivery_policy,
    default_resource_policy,
    default_state_policy,
)
from runners.models.catalogue import (
    DEFAULT_RUNNER_ID,
    LLM_AGENT_RUNNER_ID,
    WORKFLOW_RUNNER_ID,
    AgentInstance,
    AgentKind,
    AgentType,
    InvalidTransition,
    KnowledgeRetrieval,
    MultitaskStrategy,
    SubAgent,
)
from runners.models.plugin_tools import CommandDescriptor, ToolDescriptor
from runners.models.plugins import (
    PluginInstallation,
    PluginStorage,
    RunnerDescriptor,
    RuntimeWorker,
)
from runners.models.providers import LLMModel, ModelProvider
from runners.models.tools import McpServer

__all__ = [
    "DEFAULT_RUNNER_ID", "LLM_AGENT_RUNNER_ID", "AgentInstance", "AgentKind", "AgentType", "Binding", "InvalidTransition",
    "KnowledgeRetrieval", "LLMModel", "MultitaskStrategy", "ModelProvider", "PluginInstallation", "PluginStorage", "RunnerDescriptor", "RuntimeWorker", "SubAgent",
    "default_delivery_policy", "default_resource_policy", "default_state_policy",
    "CommandDescriptor", "ToolDescriptor",
    "McpServer", "WORKFLOW_RUNNER_ID",
]
