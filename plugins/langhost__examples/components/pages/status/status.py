from __future__ import annotations

from langbot_plugin.api.definition.components.page import Page, PageRequest, PageResponse


class Status(Page):
    """The example page's backend: `/echo` answers with what the page sent."""

    async def handle_api(self, request: PageRequest) -> PageResponse:
        if request.endpoint == "/echo":
            return PageResponse.ok({"method": request.method, "received": request.body})
        return PageResponse.fail(f"no endpoint {request.endpoint}")
