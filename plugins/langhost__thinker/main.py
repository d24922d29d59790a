from __future__ import annotations

from langbot_plugin.api.definition.plugin import BasePlugin


class LangHostThinker(BasePlugin):
    async def initialize(self) -> None:
        pass
