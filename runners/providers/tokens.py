"""Offline token estimate (no tokenizer can be downloaded here).

The heuristic: an ASCII character is a quarter token (OpenAI's rule of thumb for English),
any other character a whole token (CJK text runs about one token per character); each
message adds 4 for its role and separators, each image a flat 765 (OpenAI's price of a
1024x1024 image at high detail), and tools count by their JSON. It errs a little high,
which is the safe side for fitting a context window.
"""

import json
import math

from runners.providers.messages import Message, Tool, image_url, text_of

PER_MESSAGE = 4
PER_IMAGE = 765


def _text_tokens(text: str) -> int:
    ascii_chars = sum(1 for char in text if char.isascii())
    return math.ceil(ascii_chars / 4) + (len(text) - ascii_chars)


def estimate(messages: list[Message], tools: list[Tool]) -> int:
    total = 0
    for message in messages:
        if isinstance(message.content, list):
            images = [element for element in message.content if image_url(element)]
            text = text_of([element for element in message.content if not image_url(element)])
        else:
            images, text = [], text_of(message.content)
        total += PER_MESSAGE + len(images) * PER_IMAGE + _text_tokens(text)
        for call in message.tool_calls or []:
            total += _text_tokens(call.function.name + call.function.arguments)
    if tools:
        total += _text_tokens(json.dumps([tool.model_dump() for tool in tools]))
    return total
