"""Form fields that choose from what exists (models, MCP servers) instead of free text.

A value stored earlier that no longer exists stays selectable, flagged, so saving a form does
not drop it silently; a new value must be one that exists.
"""

from django import forms

from runners.models import LLMModel, McpServer

UNKNOWN = " (not registered)"


def with_unknown(choices: list[tuple[str, str]], current: list[str]) -> list[tuple[str, str]]:
    """`choices`, and each of the `current` values it lacks, flagged."""
    known = {value for value, _ in choices}
    return [*choices, *((value, f"{value}{UNKNOWN}") for value in current
                        if value and value not in known)]


def model_choices(current: list[str]) -> list[tuple[str, str]]:
    """The registered chat models, as `name — provider / upstream id`."""
    models = LLMModel.objects.filter(model_type=LLMModel.Type.CHAT).select_related(
        "provider").order_by("name")
    return with_unknown([(model.name, f"{model.name} — {model.provider.name} / "
                                      f"{model.upstream_model}"
                                      + ("" if model.is_active else " (inactive)"))
                         for model in models], current)


def mcp_server_choices(current: list[str]) -> list[tuple[str, str]]:
    servers = McpServer.objects.order_by("name").values_list("name", "transport")
    return with_unknown([(name, f"{name} ({transport})") for name, transport in servers],
                        current)


class OrderedSelects(forms.MultiWidget):
    """`slots` choice lists, read left to right: an ordered pick of several."""

    def __init__(self, choices, slots: int):
        super().__init__([forms.Select(choices=choices) for _ in range(slots)])

    def decompress(self, value):
        values = list(value or [])
        return values + [""] * (len(self.widgets) - len(values))


class OrderedChoicesField(forms.MultiValueField):
    """A list of distinct choices in the order picked; empty slots are skipped."""

    def __init__(self, choices: list[tuple[str, str]], slots: int, **kwargs):
        choices = [("", "—"), *choices]
        fields = [forms.ChoiceField(choices=choices, required=False) for _ in range(slots)]
        super().__init__(fields, widget=OrderedSelects(choices, slots), required=False,
                         require_all_fields=False, **kwargs)

    def compress(self, data_list):
        picked = [value for value in data_list or [] if value]
        if len(set(picked)) != len(picked):
            raise forms.ValidationError("A choice is picked twice.")
        return picked
