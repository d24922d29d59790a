from django.urls import path, re_path

from langhost.base.api import UUID, OptionalSlashRouter
from runners.api.langbot import views as langbot_views
from runners.api.views import catalogue as views
from runners.api.views import conversations as conversation_views
from runners.api.views import interactions as interaction_views
from runners.api.views import plugin_tools as tool_views
from runners.api.views import providers as provider_views
from runners.api.views import runs as run_views
from runners.api.views import tools as mcp_views
from runners.knowledge.api import views as knowledge_views
from runners.plugins.api import views as plugin_views
from runners.schedules.api import views as schedule_views
from runners.skills.api import views as skill_views
from runners.webhooks.api import views as webhook_views

router = OptionalSlashRouter()
# Runs first: Django tries the patterns in order, and starting runs is the busiest route.
router.register("runs", run_views.RunViewSet, basename="run")
router.register("runners", run_views.RunnerViewSet, basename="runner")
router.register("agent-types", views.AgentTypeViewSet, basename="agent-type")
router.register(
    f"projects/(?P<project_id>{UUID})/agents", views.ProjectAgentViewSet,
    basename="project-agent",
)
_AGENT = f"projects/(?P<project_id>{UUID})/agents/(?P<agent_id>{UUID})"
router.register(f"{_AGENT}/conversations", conversation_views.ConversationViewSet,
                basename="agent-conversation")
router.register(f"{_AGENT}/conversations/(?P<conversation_id>[^/]+)/artifacts",
                conversation_views.ArtifactViewSet, basename="conversation-artifact")
router.register(f"{_AGENT}/conversations/(?P<conversation_id>[^/]+)/interactions",
                interaction_views.InteractionViewSet, basename="conversation-interaction")
router.register("tools", tool_views.ToolViewSet, basename="tool")
router.register("model-providers", provider_views.ModelProviderViewSet, basename="model-provider")
router.register("models", provider_views.LLMModelViewSet, basename="llm-model")
router.register("mcp-servers", mcp_views.McpServerViewSet, basename="mcp-server")
router.register("skills", skill_views.SkillViewSet, basename="skill")
router.register("plugins", plugin_views.PluginViewSet, basename="plugin")
_PROJECT = f"projects/(?P<project_id>{UUID})"
router.register(f"{_PROJECT}/schedules", schedule_views.ScheduleViewSet, basename="schedule")
router.register(f"{_PROJECT}/knowledge-bases", knowledge_views.KnowledgeBaseViewSet,
                basename="knowledge-base")
router.register(f"{_PROJECT}/knowledge-bases/(?P<knowledge_base_id>{UUID})/documents",
                knowledge_views.KnowledgeDocumentViewSet, basename="knowledge-document")

# The LangBot-compatible surface (LangBot's own E2E suite drives LangHost through it).
langbot_urlpatterns = [
    path("user/init", langbot_views.UserInitView.as_view(), name="langbot-user-init"),
    path("user/auth", langbot_views.UserAuthView.as_view(), name="langbot-user-auth"),
    path("pipelines/_/metadata", langbot_views.PipelineMetadataView.as_view(),
         name="langbot-pipeline-metadata"),
    path("system/debug/plugin/action", langbot_views.DebugPluginActionView.as_view(),
         name="langbot-debug-plugin-action"),
]

urlpatterns = [
    # A question's own URL: its detail, and its answer (a router maps POST to the list only).
    re_path(f"^{_AGENT}/conversations/(?P<conversation_id>[^/]+)/interactions/"
            "(?P<interaction_id>[^/]+)(?:/)?$", interaction_views.InteractionViewSet.as_view(
                {"get": "show", "post": "answer"}), name="conversation-interaction-answer"),
    path("runs/<str:run_id>/attachments/<str:token>", run_views.RunAttachmentView.as_view(),
         name="run-attachment"),
    path("plugins/_sdk/page-sdk.js", plugin_views.page_script, name="plugin-page-script"),
    path("projects/<uuid:project_id>/webhook", webhook_views.ProjectWebhookView.as_view(),
         name="project-webhook"),
    path("projects/<uuid:project_id>/webhook/rotate-secret",
         webhook_views.RotateSecretView.as_view(), name="project-webhook-rotate-secret"),
    *router.urls, *langbot_urlpatterns,
]
