"""The slice of LangBot's HTTP API its own end-to-end suite needs, answered by LangHost.

LangBot answers `{"code": 0, "data": ...}` on success and `{"code": <non-zero>, "msg": ...}`
otherwise; these views keep that shape.
"""

from django.contrib.auth import authenticate
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts import first_admin
from accounts.permissions import IsSuperuser
from accounts.signin import remember_sign_in
from accounts.tokens import access_token_for
from langhost.base.async_views import AsyncDispatch
from ledger import wire
from runners.api.exceptions import error_body
from runners.api.langbot.serializers import (
    Credentials,
    DebugAction,
    DebugActionReplySerializer,
    FirstAdmin,
    LangBotReplySerializer,
    PipelineMetadataReplySerializer,
    RunAgentData,
    UserAuthReplySerializer,
)
from runners.conversations import services as door
from runners.conversations.callers import Caller
from runners.conversations.exceptions import Refused
from runners.models import RunnerDescriptor
from runners.protocol import RunRefused


def failure(message: str, status: int = 400, code: int = 1) -> Response:
    return Response({"code": code, "msg": message}, status=status)


def failure_for(exc: Refused | APIException) -> Response:
    """`exc` as REST answers it, in LangBot's shape: the same status and wording."""
    status, body = error_body(exc)
    return failure(body["detail"], status=status)


class LangBotView(APIView):
    """Every error in LangBot's shape too, those of the shared machinery included (a body
    that is not JSON, a missing token)."""

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        if isinstance(response.data, dict) and "code" not in response.data:
            response.data = {"code": 1, "msg": str(response.data["detail"])}
        return response


def read_credentials(request, form=Credentials) -> tuple[dict | None, Response | None]:
    """`({user, password}, None)`, or `(None, failure)` naming the fields at fault."""
    credentials = form(data=request.data)
    if not credentials.is_valid():
        return None, failure_for(ValidationError(credentials.errors))
    return credentials.validated_data, None


ALREADY_INITIALIZED = {"code": 1, "msg": "LangHost is already initialized."}


class UserInitView(LangBotView):
    """Create the first superuser, from this machine or with the setup token `serve` printed
    (`accounts.first_admin`); once a superuser exists, change nothing."""

    permission_classes = [AllowAny]
    authentication_classes = []

    @extend_schema(request=FirstAdmin, responses={200: LangBotReplySerializer,
                                                  400: LangBotReplySerializer,
                                                  403: LangBotReplySerializer})
    def post(self, request):
        credentials, refused = read_credentials(request, FirstAdmin)
        if refused:
            return refused
        if first_admin.has_admin():
            return Response(ALREADY_INITIALIZED)
        if not first_admin.may_make_first_admin(request, credentials.get("setup_token")):
            return failure("The first admin is made from this machine, or with the setup "
                           "token `manage.py serve` printed (setup_token).", status=403)
        try:
            first_admin.make_first_admin(credentials["user"], credentials["password"])
        except first_admin.AlreadyInitialized:
            return Response(ALREADY_INITIALIZED)
        except first_admin.AddressTaken:
            return failure("user: an account has this email already; give the first admin "
                           "another one.")
        return Response({"code": 0, "msg": "ok"})


class UserAuthView(LangBotView):
    permission_classes = [AllowAny]
    authentication_classes = []

    @extend_schema(request=Credentials, responses={200: UserAuthReplySerializer,
                                                   400: LangBotReplySerializer,
                                                   401: LangBotReplySerializer})
    def post(self, request):
        credentials, refused = read_credentials(request)
        if refused:
            return refused
        # Django's request, where the sign-in throttle (axes) marks a locked-out account.
        user = authenticate(request._request, email=credentials["user"].lower(),
                            password=credentials["password"])
        if user is None:
            return failure("Incorrect user or password.", status=401)
        remember_sign_in(request._request, user)
        return Response({"code": 0, "msg": "ok", "data": {"token": access_token_for(user)}})


class PipelineMetadataView(LangBotView):
    """Pipeline config metadata: the `ai` group's `runner` stage lists the available runners."""

    @extend_schema(responses=PipelineMetadataReplySerializer)
    def get(self, request):
        options = [
            {"name": runner.id, "label": runner.label or {"en_US": runner.runner_name}}
            for runner in RunnerDescriptor.objects.filter(available=True).order_by("id")
        ]
        runner_stage = {
            "name": "runner",
            "label": {"en_US": "Runner"},
            "config": [{"name": "id", "label": {"en_US": "Runner"}, "type": "select",
                        "required": True, "default": options[0]["name"] if options else "",
                        "options": options}],
        }
        return Response({"code": 0, "msg": "ok", "data": {
            "configs": [{"name": "ai", "label": {"en_US": "AI"}, "stages": [runner_stage]}]
        }})


async def debug_reply(prepared: door.PreparedRun) -> dict:
    """The runner's message.completed result, or why there was none."""
    try:
        outcome = await door.run_to_end(prepared)
    except RunRefused as exc:
        return {"code": 1, "msg": str(exc)}
    completed = next((m for m in outcome["messages"] if m["type"] == "message.completed"), None)
    if completed is None:
        return {"code": 1, "msg": f"Run {outcome['status']}: {outcome['status_reason']}",
                "data": {"run_id": outcome["run_id"], "status": outcome["status"]}}
    return {"code": 0, "msg": "ok", "data": completed}


class DebugPluginActionView(AsyncDispatch, LangBotView):
    """`run_agent`: run a plugin runner with a context, through the one door; the run happens
    on the event loop, and a client that goes away cancels it."""

    permission_classes = [IsSuperuser]

    @extend_schema(request=DebugAction, responses={200: DebugActionReplySerializer,
                                                   400: LangBotReplySerializer})
    async def post(self, request):
        body = DebugAction(data=request.data)
        body.is_valid(raise_exception=True)
        if body.validated_data["action"] != "run_agent":
            return failure(f"Unsupported debug action {body.validated_data['action']!r}.")
        run_agent = RunAgentData(data=body.validated_data["data"])
        if not run_agent.is_valid():
            raise ValidationError({"data": run_agent.errors})
        data = run_agent.validated_data
        runner_id = f"plugin:{data['plugin_author']}/{data['plugin_name']}/{data['runner_name']}"
        context = data.get("context") or {}
        event = context.get("event") or {}
        conversation = context.get("conversation") or {}
        try:
            prepared = await door.prepare_runner_run(
                Caller(request.user), runner_id=runner_id, binding_prefix="debug",
                runner_config=dict(context.get("config") or {}),
                timeout=body.validated_data.get("timeout"), event_id=event.get("event_id"),
                event_type=event.get("event_type"),
                conversation_id=conversation.get("conversation_id"),
                event_input={"text": (context.get("input") or {}).get("text") or ""},
            )
        except Refused as exc:
            return failure_for(exc)
        return HttpResponse(wire.dumps(await debug_reply(prepared)),
                            content_type="application/json")
