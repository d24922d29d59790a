"""Runners that run inside LangHost's process, with the same result contract as plugin runners."""

import time
from collections.abc import AsyncIterator

BUILTIN_PREFIX = "builtin:"


def _result(context: dict, sequence: int, type_: str, data: dict) -> dict:
    return {"run_id": context["run_id"], "type": type_, "data": data, "usage": None,
            "sequence": sequence, "timestamp": int(time.time())}


async def echo(context: dict) -> AsyncIterator[dict]:
    """Answers `echo: <input text>`: the smallest complete run."""
    text = (context.get("input") or {}).get("text") or ""
    message = {"role": "assistant", "content": f"echo: {text}"}
    yield _result(context, 1, "message.completed", {"message": message, "file_ids": []})
    yield _result(context, 2, "run.completed", {"finish_reason": "stop"})


BUILTIN_RUNNERS = {
    "builtin:echo": {
        "run": echo,
        "label": {"en_US": "Echo"},
        "description": {"en_US": "Replies with the input text. Built in; needs no plugin."},
        "capabilities": {"streaming": False},
        "permissions": {},
    },
}
