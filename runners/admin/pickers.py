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


# The runner-config field types a form field stands for; the others (models, persona, MCP
# servers, knowledge bases) are filled from the type's own fields, or written in the JSON box.
_SIMPLE_FIELDS = {
    "string": lambda required: forms.CharField(required=required),
    "text": lambda required: forms.CharField(required=required, widget=forms.Textarea(
        attrs={"rows": 3})),
    "integer": lambda required: forms.IntegerField(required=required),
    "int": lambda required: forms.IntegerField(required=required),
    "float": lambda required: forms.FloatField(required=required),
    "number": lambda required: forms.FloatField(required=required),
    "boolean": lambda required: forms.NullBooleanField(required=False),
    "bool": lambda required: forms.NullBooleanField(required=False),
    "secret": lambda required: forms.CharField(required=False, widget=forms.PasswordInput),
}
CONFIG_PREFIX = "runner_config__"


def _label(field: dict, name: str) -> str:
    label = field.get("label")
    if isinstance(label, dict):
        return label.get("en_US") or next(iter(label.values()), name)
    return label if isinstance(label, str) and label else name


def runner_config_fields(schema_fields: dict[str, dict], config: dict,
                         secrets: list[str]) -> dict[str, forms.Field]:
    """A form field for each config field of a simple type (text, numbers, yes/no, a choice,
    a secret), keyed `runner_config__<name>`, holding `config`'s value (never a secret's)."""
    made = {}
    for name, field in schema_fields.items():
        kind = field.get("type")
        options = [option.get("name") if isinstance(option, dict) else option
                   for option in field.get("options") or []]
        if kind == "select" and options:
            form_field = forms.ChoiceField(
                required=False, choices=[("", "— default —"), *((str(o), str(o))
                                                                 for o in options)])
        elif kind in _SIMPLE_FIELDS:
            form_field = _SIMPLE_FIELDS[kind](False)
        else:
            continue
        form_field.label = f"{_label(field, name)} ({name})"
        default = f" Default: {field['default']!r}." if "default" in field else ""
        form_field.help_text = ("Set; left blank it is kept, clear it in the JSON box with "
                                "null." if name in secrets else
                                "Left blank: the runner's default." + default)
        if name not in secrets and config.get(name) is not None:
            form_field.initial = config[name]
        made[CONFIG_PREFIX + name] = form_field
    return made


def with_config_fields(config: dict, cleaned: dict) -> dict:
    """`config` with the values the runner-config form fields were given (blank ones unset,
    a secret left blank kept)."""
    merged = dict(config or {})
    for key, value in cleaned.items():
        if not key.startswith(CONFIG_PREFIX):
            continue
        name = key[len(CONFIG_PREFIX):]
        if value in ("", None):
            if not isinstance(merged.get(name), dict):  # a sealed secret stays
                merged.pop(name, None)
        else:
            merged[name] = value
    return merged
