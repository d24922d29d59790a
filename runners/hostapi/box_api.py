"""LangBot's six box actions, answered for runs granted the box (`available_apis.box`): one
box per conversation, its workspace (`runners.box.services`).

- `get_box_status` -> `{available, enabled, limit, used, remaining, reason?}`;
- `list_boxes` -> `{"items": [{id, status}]}` (the conversation's box, once made);
- `acquire_box {reuse_key, options}` -> `{id, status}`: the conversation's box;
- `bind_box {box_id}` -> `{box_id, outbox}` (`/workspace/outbox`, where a runner leaves files);
- `import_box_attachments {attachment_ids?}` -> `{"items": [BoxFile]}`: the run's message's
  files copied into `/workspace/inbox/` (all of them, or those whose `ref` is named);
- `export_box_files {paths}` -> `{"items": [BoxFile], "warning": null}`: each file saved as a
  version of a conversation artifact (its id `artifact:<name>`).

A BoxFile is `{id, name, type, size, path}`. Paths out of the workspace and other bad
arguments are refused `box.bad_arguments`.
"""

from asgiref.sync import sync_to_async

from ledger.models import AgentRun
from ledger.selectors import conversations as conversation_selectors
from ledger.services.artifacts import ArtifactError
from runners.box import services
from runners.hostapi import run_api
from runners.runtime.host_actions import HostError

ACTIONS = frozenset({"get_box_status", "list_boxes", "acquire_box", "bind_box",
                     "import_box_attachments", "export_box_files"})
OUTBOX = "outbox"
MAX_PATHS = 100


async def handle(action: str, data: dict, context: dict | None) -> dict:
    run, _ = await run_api.authorize(action, data, context)
    workspace = services.Workspace(project_id=run.project_id,
                                   conversation_id=run.conversation_id)
    try:
        return await sync_to_async(_answer)(action, run, workspace, data)
    except (services.BoxError, ArtifactError) as exc:
        raise HostError("box.bad_arguments", f"{action}: {exc}") from None


def _box(workspace: services.Workspace) -> dict:
    return {"id": workspace.session_id, "status": "ready"}


def _answer(action: str, run: AgentRun, workspace: services.Workspace, data: dict) -> dict:
    made = workspace.directory.is_dir()
    if action == "get_box_status":
        return {"available": True, "enabled": True, "limit": 1, "used": int(made),
                "remaining": int(not made)}
    if action == "list_boxes":
        return {"items": [_box(workspace)] if made else []}
    if action == "acquire_box":
        reuse_key = data.get("reuse_key")
        if not isinstance(reuse_key, str) or not 1 <= len(reuse_key) <= 1024:
            raise services.BoxError("reuse_key is a string of 1 to 1024 characters")
        workspace.ensure()
        return _box(workspace)
    if data.get("box_id", workspace.session_id) != workspace.session_id:
        raise services.BoxError(f"box {data.get('box_id')!r} is not this conversation's")
    if action == "bind_box":
        workspace.ensure()
        workspace.path(OUTBOX).mkdir(parents=True, exist_ok=True)
        return {"box_id": workspace.session_id, "outbox": f"{services.MOUNT}/{OUTBOX}"}
    if action == "import_box_attachments":
        return {"items": _imported(run, workspace, data.get("attachment_ids"))}
    return {"items": _export(run, workspace, data.get("paths")), "warning": None}


def _scope(run: AgentRun) -> tuple[str, str, str]:
    owner = conversation_selectors.owner_of(run.conversation_id)
    if owner is None:
        raise services.BoxError("this run's conversation is gone")
    return str(owner[0]), str(owner[1]), run.conversation_id


def _imported(run: AgentRun, workspace: services.Workspace, wanted) -> list[dict]:
    if wanted is not None and not isinstance(wanted, list):
        raise services.BoxError("attachment_ids is a list of attachment refs")
    attachments = conversation_selectors.attachments_of_message(run.conversation_id,
                                                                run.event_id)
    return services.import_attachments(workspace, _scope(run), attachments, wanted)


def _export(run: AgentRun, workspace: services.Workspace, paths) -> list[dict]:
    if not isinstance(paths, list) or not paths or len(paths) > MAX_PATHS:
        raise services.BoxError(f"paths is a list of 1 to {MAX_PATHS} workspace paths")
    return services.export_files(workspace, _scope(run), paths, run.run_id)
