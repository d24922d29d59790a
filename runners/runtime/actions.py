"""Answering the runtime's calls into the host.

The runtime calls every ``RuntimeToLangBotAction`` and relays every
``PluginToRuntimeAction`` a plugin sends under the same name, so a handler is
registered for each of them and delegated to ``HostActions`` (whose defaults
refuse with ``host.unsupported``). Any other name gets the SDK's own error
frame "ValueError: Action <name> not found".

Files go as the SDK sends them, in chunks ahead of the answer that names them: a
knowledge file a plugin asks for (``get_knowledge_file_stream``), and the file a parser
plugin parses (``invoke_parser``: the host sends the file, then asks the runtime to have the
parser plugin parse it; ``list_parsers`` asks the runtime which plugins parse what).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from langbot_plugin.entities.io.actions.enums import (
    LangBotToRuntimeAction,
    PluginToRuntimeAction,
    RuntimeToLangBotAction,
)
from langbot_plugin.entities.io.req import ActionRequest
from langbot_plugin.entities.io.resp import ActionResponse
from langbot_plugin.runtime.io.handler import Handler

from runners.runtime.host_actions import HostActions, HostError

logger = logging.getLogger(__name__)

# Streamed plugin -> host calls (the runtime uses call_action_generator for these).
STREAMED_ACTIONS = frozenset({PluginToRuntimeAction.INVOKE_LLM_STREAM.value})
FILE_STREAM = PluginToRuntimeAction.GET_KNOWLEDEGE_FILE_STREAM
PARSER_TIMEOUT_SECONDS = 300
# Frames up to this size are parsed on the event loop (see `HostHandler._decode_message`).
INLINE_FRAME_CHARS = 64 * 1024
# Their payload is a `dict[str, Any]`: validating one reads its top-level fields only.
SHALLOW_FRAME_MODELS = (ActionRequest, ActionResponse)


def _error_response(action: str, exc: Exception) -> ActionResponse:
    """A host failure becomes an error frame with a stable code in its text."""
    if isinstance(exc, HostError):
        return ActionResponse.error(str(exc), {"error": exc.as_error()})
    logger.exception("host action %s failed", action)
    error = HostError("host.internal_error", f"{action} failed: {exc.__class__.__name__}: {exc}")
    return ActionResponse.error(str(error), {"error": error.as_error()})


class HostHandler(Handler):
    """The SDK Handler (framing, seq ids, streams, cancel) with host actions."""

    name = "LangHost"

    def __init__(self, connection: Any, host: HostActions, *, file_storage_dir: str,
                 binding: Any = None):
        # cancel_active_tasks_on_close: host work for a dead connection has no
        # one to answer to, so it is cancelled rather than left running.
        super().__init__(
            connection, file_storage_dir=file_storage_dir, cancel_active_tasks_on_close=True
        )
        self.host = host
        # The installation binding the host's own calls into the runtime carry.
        self.binding = binding
        self._register_settings_and_storage()
        self._register_files()
        for action in PluginToRuntimeAction:
            if action.value in STREAMED_ACTIONS:
                self._register_stream(action)
            elif action.value not in self.actions:
                self._register_run_api(action)

    # The SDK parses and validates every incoming frame in a worker thread, so a huge one
    # cannot stall a shared event loop. A run's frames are small: parsing one here costs less
    # than the two hops to a thread and back. Bigger frames keep the SDK's path.
    async def _decode_message(self, message: str, *, blocking_scope: str | None = None) -> Any:
        if len(message) <= INLINE_FRAME_CHARS:
            return json.loads(message)
        return await super()._decode_message(message, blocking_scope=blocking_scope)

    # The SDK also encodes every outgoing frame in a worker thread. Encoding (pydantic's dump,
    # json's C encoder) holds the GIL from start to end, so there it stalls the loop as long as
    # it would here, plus the hop to the thread and back: a run's frames are encoded here.
    async def _encode_message(self, payload: Any, *, action_context: Any = None,
                              blocking_scope: str | None = None) -> str:
        return json.dumps(payload.model_dump() if hasattr(payload, "model_dump") else payload)

    async def _validate_message_model(self, model_type: Any, payload: Any, *,
                                      blocking_scope: str | None = None) -> Any:
        if model_type in SHALLOW_FRAME_MODELS:
            return model_type.model_validate(payload)
        return await super()._validate_message_model(model_type, payload,
                                                     blocking_scope=blocking_scope)

    def _context(self) -> dict[str, Any] | None:
        context = self.current_action_context
        return None if context is None else context.model_dump(mode="json")

    def _register(self, action: Any, answer: Callable[[dict[str, Any]], Awaitable[dict]]) -> None:
        async def respond(data: dict[str, Any]) -> ActionResponse:
            try:
                return ActionResponse.success(await answer(data))
            except Exception as exc:
                return _error_response(action.value, exc)

        self.actions[action.value] = respond

    def _register_settings_and_storage(self) -> None:
        host = self.host
        actions = RuntimeToLangBotAction

        async def get_plugin_settings(data: dict[str, Any]) -> dict:
            return await host.get_plugin_settings(data["plugin_author"], data["plugin_name"])

        async def initialize_plugin_settings(data: dict[str, Any]) -> dict:
            await host.initialize_plugin_settings(data)
            return {}

        async def get_binary_storage(data: dict[str, Any]) -> dict:
            value = await host.get_binary_storage(data["owner_type"], data["owner"], data["key"])
            return {"value_base64": base64.b64encode(value).decode("ascii")}

        async def set_binary_storage(data: dict[str, Any]) -> dict:
            value = base64.b64decode(data["value_base64"], validate=True)
            await host.set_binary_storage(data["owner_type"], data["owner"], data["key"], value)
            return {}

        async def get_binary_storage_keys(data: dict[str, Any]) -> dict:
            return {"keys": await host.get_binary_storage_keys(data["owner_type"], data["owner"])}

        async def delete_binary_storage(data: dict[str, Any]) -> dict:
            await host.delete_binary_storage(data["owner_type"], data["owner"], data["key"])
            return {}

        async def get_config_file(data: dict[str, Any]) -> dict:
            return await host.get_config_file(data)

        self._register(actions.GET_PLUGIN_SETTINGS, get_plugin_settings)
        self._register(actions.INITIALIZE_PLUGIN_SETTINGS, initialize_plugin_settings)
        self._register(actions.GET_BINARY_STORAGE, get_binary_storage)
        self._register(actions.SET_BINARY_STORAGE, set_binary_storage)
        self._register(actions.GET_BINARY_STORAGE_KEYS, get_binary_storage_keys)
        self._register(actions.DELETE_BINARY_STORAGE, delete_binary_storage)
        # Same name as PluginToRuntimeAction.GET_CONFIG_FILE, so that one is covered too.
        self._register(actions.GET_CONFIG_FILE, get_config_file)

    def _register_files(self) -> None:
        async def file_stream(data: dict[str, Any]) -> dict:
            content, extension = await self.host.read_file(FILE_STREAM.value, data,
                                                           self._context())
            return {"file_key": await self.send_file(content, extension)}

        async def list_parsers(data: dict[str, Any]) -> dict:
            answer = await self.call_action(LangBotToRuntimeAction.LIST_PARSERS, {},
                                            action_context=self.binding)
            wanted = data.get("mime_type")
            return {"parsers": [parser for parser in answer.get("parsers") or []
                                if not wanted or wanted in parser.get("supported_mime_types", [])]}

        async def invoke_parser(data: dict[str, Any]) -> dict:
            content, extension = await self.host.read_file(
                PluginToRuntimeAction.INVOKE_PARSER.value, data, self._context())
            file_key = await self.send_file(content, extension, action_context=self.binding)
            return await self.call_action(LangBotToRuntimeAction.PARSE_DOCUMENT, {
                "plugin_author": data.get("plugin_author"),
                "plugin_name": data.get("plugin_name"),
                "context": {"file_key": file_key, "mime_type": data.get("mime_type") or "",
                            "filename": data.get("filename") or "",
                            "metadata": data.get("metadata") or {}},
            }, timeout=PARSER_TIMEOUT_SECONDS, action_context=self.binding)

        self._register(FILE_STREAM, file_stream)
        self._register(PluginToRuntimeAction.LIST_PARSERS, list_parsers)
        self._register(PluginToRuntimeAction.INVOKE_PARSER, invoke_parser)

    def _register_run_api(self, action: PluginToRuntimeAction) -> None:
        async def answer(data: dict[str, Any]) -> dict:
            return await self.host.handle_run_api(action.value, data, self._context())

        self._register(action, answer)

    def _register_stream(self, action: PluginToRuntimeAction) -> None:
        async def respond(data: dict[str, Any]) -> AsyncIterator[ActionResponse]:
            # An error frame ends a stream, so a failure is the last item.
            try:
                async for item in self.host.stream_run_api(action.value, data, self._context()):
                    yield ActionResponse.success(item)
            except Exception as exc:
                yield _error_response(action.value, exc)

        self.actions[action.value] = respond
