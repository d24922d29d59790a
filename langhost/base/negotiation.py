"""Content negotiation with a shortcut for the clients that accept anything."""

from rest_framework.negotiation import DefaultContentNegotiation


class ContentNegotiation(DefaultContentNegotiation):
    """DRF's negotiation. A request that accepts anything (`Accept: */*` or none) and asks for
    no format gets the first renderer and its media type, DRF's own answer, without parsing
    media types: what API clients send, on every request."""

    def select_renderer(self, request, renderers, format_suffix=None):
        override = self.settings.URL_FORMAT_OVERRIDE
        if renderers and not format_suffix and request.headers.get("accept", "*/*") == "*/*" \
                and (not override or override not in request.query_params):
            return renderers[0], renderers[0].media_type
        return super().select_renderer(request, renderers, format_suffix)
