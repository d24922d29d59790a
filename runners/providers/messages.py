"""The protocol edge: LangBot-shaped messages and tools in, the SDK's Message and MessageChunk
shapes out, validated with the plugin SDK's own pydantic models.

A model's finish reason (`stop`, `tool_calls`, `length`, ...) travels in the message's or
final chunk's `provider_specific_fields`, the SDK's slot for what a provider adds.
"""

from collections.abc import Iterable

from langbot_plugin.api.entities.builtin.provider.message import (
    ContentElement,
    FunctionCall,
    Message,
    MessageChunk,
    ToolCall,
)
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from runners.providers.errors import ProviderError


class Tool(BaseModel):
    """An `LLMTool` as a plugin sends it (`model_dump()`: its Python function stays behind)."""

    model_config = ConfigDict(from_attributes=True)

    name: str
    description: str = ""
    parameters: dict = Field(default_factory=dict)


_messages = TypeAdapter(list[Message])
_tools = TypeAdapter(list[Tool])


def parse(messages: Iterable, tools: Iterable | None) -> tuple[list[Message], list[Tool]]:
    """Messages and tools (dicts or SDK objects) as validated SDK models."""
    try:
        return (_messages.validate_python(list(messages)),
                _tools.validate_python(list(tools or []), from_attributes=True))
    except ValidationError as exc:
        raise ProviderError(f"invalid request: {exc.errors()[0]['msg']} "
                            f"at {'.'.join(map(str, exc.errors()[0]['loc']))}") from None


def text_of(content: str | list[ContentElement] | None) -> str:
    """The text of a message's content; other elements are named, not dropped silently."""
    if content is None or isinstance(content, str):
        return content or ""
    return "\n".join(element.text or "" if element.type == "text" else str(element)
                     for element in content)


# Base64 prefixes of the image formats providers accept, for data that comes without a type.
_MAGIC = {"iVBORw0KGgo": "image/png", "/9j/": "image/jpeg", "R0lGOD": "image/gif",
          "UklGR": "image/webp"}


def image_url(element: ContentElement) -> str | None:
    """An image element as a URL: http(s) as given, base64 as a `data:` URL."""
    if element.type == "image_url" and element.image_url:
        return element.image_url.url
    if element.type == "image_base64" and element.image_base64:
        data = element.image_base64
        if data.startswith("data:"):
            return data
        media_type = next((kind for prefix, kind in _MAGIC.items() if data.startswith(prefix)),
                          "image/png")
        return f"data:{media_type};base64,{data}"
    return None


def tool_call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, type="function", function=FunctionCall(name=name, arguments=arguments))


def assistant_message(text: str | None, tool_calls: list[ToolCall], finish_reason: str | None,
                      **extra) -> dict:
    fields = {"finish_reason": finish_reason, **extra} if finish_reason else extra
    return Message(role="assistant", content=text, tool_calls=tool_calls or None,
                   provider_specific_fields=fields or None).model_dump()


def chunk(text: str | None = None, tool_calls: list[ToolCall] | None = None,
          finish_reason: str | None = None, **extra) -> dict:
    """One streamed delta: new text, tool-call deltas (id and name repeated on each), or the
    final chunk (`is_final`, with the finish reason)."""
    fields = {"finish_reason": finish_reason, **extra} if finish_reason else extra
    return MessageChunk(role="assistant", content=text or None, tool_calls=tool_calls or None,
                        is_final=finish_reason is not None,
                        provider_specific_fields=fields or None).model_dump()
