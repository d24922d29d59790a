"""`GET /api/v1/`: the API's entry points, for people and clients finding their way in."""

from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

# Named routes, listed as links; the per-project ones need a project id, so they are templates.
ENTRY_POINTS = {
    "register": "auth-register", "login": "auth-login", "refresh": "auth-refresh",
    "logout": "auth-logout", "me": "auth-me", "projects": "project-list",
    "agent-types": "agent-type-list", "runs": "run-list", "runners": "runner-list",
    "tools": "tool-list", "model-providers": "model-provider-list", "models": "llm-model-list",
    "mcp-servers": "mcp-server-list", "schema": "schema", "docs": "swagger-ui",
}
TEMPLATES = {
    "agents": "projects/{project_id}/agents",
    "conversations": "projects/{project_id}/agents/{agent_id}/conversations",
    "messages": "projects/{project_id}/agents/{agent_id}/conversations/{conversation_id}/messages",
}


class ApiRoot(APIView):
    """Where to start: every collection of the API, and the routes that need ids."""

    permission_classes = [AllowAny]

    @extend_schema(exclude=True)
    def get(self, request):
        links = {name: reverse(route, request=request) for name, route in ENTRY_POINTS.items()}
        base = reverse("api-root", request=request)
        return Response({**links, "per_project": {name: base + path
                                                  for name, path in TEMPLATES.items()}})
