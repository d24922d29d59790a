"""A runner's own config, in LangBot's shapes: the fields its component YAML declares
(`spec.config`, stored as the descriptor's `config_schema`).

- `check(config, schema)`: an agent type's explicit `runner_config`, checked against the
  schema: unknown keys and values of the wrong shape are refused, naming the field.
- `filled(agent_type, schema, models)`: what the agent type's own fields say for the runner's
  fields: its models fill a `model-fallback-selector` (`{primary, fallbacks}`, model ids) or
  an `llm-model-selector` (the primary's id); its persona a `prompt-editor` (a list of
  messages); its MCP servers an MCP selector; its knowledge bases a knowledge-base selector;
  any other field keeps its declared default.
- `with_model_ids(config, schema, model_ids)`: a rerank model a config names by name, named
  by id, as the runner's `invoke_rerank` names it.
- Secrets (fields of type `secret`, e.g. a Dify API key) are write-only: stored encrypted
  (`sealed`), shown by name only (`shown`, `secrets_set`), opened for the runner only
  (`opened`).
"""

from collections.abc import Mapping

from runners.models import AgentType, Binding, PluginInstallation, RunnerDescriptor
from runners.providers.secrets import UnreadableKey, decrypt, encrypt, rotated

SECRET = "secret"
SECRET_LABEL = b"langhost.runner-config.secret"
# How a sealed secret is stored in place of its value.
SEALED = "$encrypted"

PROMPT_EDITOR = "prompt-editor"
MODEL_FALLBACK_SELECTOR = "model-fallback-selector"
LLM_MODEL_SELECTORS = {"llm-model-selector", "select-llm-model"}
MCP_SELECTORS = {"mcp-server-selector", "mcp-server-multi-selector"}
KNOWLEDGE_BASE_SELECTORS = {"knowledge-base-selector", "knowledge-base-multi-selector"}
RERANK_MODEL_SELECTOR = "rerank-model-selector"


class ConfigError(ValueError):
    """`errors`: field name -> what is wrong with it."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{name}: {error}" for name, error in errors.items()))
        self.errors = errors


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _messages(value) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, Mapping) and isinstance(item.get("role"), str) and "content" in item
        for item in value)


def _fallbacks(value) -> bool:
    return (isinstance(value, Mapping) and set(value) <= {"primary", "fallbacks", "reasoning"}
            and isinstance(value.get("primary", ""), str)
            and _strings(value.get("fallbacks", [])))


# What each field type takes: a check, and the words that say it. Other types take any JSON.
SHAPES = {
    "string": (lambda v: isinstance(v, str), "a string"),
    SECRET: (lambda v: isinstance(v, str), "a string"),
    "text": (lambda v: isinstance(v, str), "a string"),
    "integer": (_is_int, "an integer"),
    "int": (_is_int, "an integer"),
    "float": (lambda v: _is_int(v) or isinstance(v, float), "a number"),
    "number": (lambda v: _is_int(v) or isinstance(v, float), "a number"),
    "boolean": (lambda v: isinstance(v, bool), "true or false"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "array[string]": (_strings, "a list of strings"),
    PROMPT_EDITOR: (_messages, "a list of messages ({role, content})"),
    MODEL_FALLBACK_SELECTOR: (_fallbacks, "{primary: <model id>, fallbacks: [<model id>...]}"),
    **{kind: (lambda v: isinstance(v, str), "a model id")
       for kind in (*LLM_MODEL_SELECTORS, RERANK_MODEL_SELECTOR)},
    "knowledge-base-selector": (lambda v: isinstance(v, str), "a knowledge base id"),
    "knowledge-base-multi-selector": (_strings, "a list of knowledge base ids"),
    "mcp-server-selector": (lambda v: isinstance(v, str), "an MCP server name"),
    "mcp-server-multi-selector": (_strings, "a list of MCP server names"),
}


def schema_of(runner_id: str) -> list:
    """The config fields runner `runner_id` declares (none for a built-in or unknown one)."""
    if runner_id.startswith("builtin:"):
        return []
    return RunnerDescriptor.objects.filter(pk=runner_id).values_list(
        "config_schema", flat=True).first() or []


def described(schema) -> str:
    """The schema's fields in a line each: name, type, required, default."""
    lines = []
    for name, field in fields_of(schema).items():
        extra = ", required" if field.get("required") else ""
        if "default" in field:
            extra += f", default {field['default']!r}"
        lines.append(f"{name} ({field.get('type') or 'any'}{extra})")
    return "; ".join(lines)


def fields_of(schema) -> dict[str, dict]:
    """The schema's fields by name (items without a name are not fields)."""
    return {item["name"]: item for item in schema or []
            if isinstance(item, Mapping) and isinstance(item.get("name"), str)}


def _option_names(field: dict) -> list[str]:
    return [option.get("name") if isinstance(option, Mapping) else option
            for option in field.get("options") or []]


def check(config, schema, runner_id: str) -> dict:
    """`config` if the schema declares each of its keys and each value has its field's
    shape; else ConfigError naming every field at fault."""
    if not isinstance(config, Mapping):
        raise ConfigError({"runner_config": "must be an object"})
    fields, errors = fields_of(schema), {}
    for name, value in config.items():
        field = fields.get(name)
        if field is None:
            declared = ", ".join(sorted(fields)) or "none"
            errors[name] = f"runner '{runner_id}' declares no such config field " \
                           f"(its fields: {declared})"
            continue
        kind = field.get("type")
        if kind == SECRET and _is_sealed(value):
            continue  # stored before: already checked
        if kind == "select" and field.get("options") and value not in _option_names(field):
            errors[name] = f"must be one of {_option_names(field)}"
        elif kind in SHAPES and value is not None and not SHAPES[kind][0](value):
            errors[name] = f"must be {SHAPES[kind][1]}"
    if errors:
        raise ConfigError(errors)
    return dict(config)


def filled(agent_type, schema, model_ids: Mapping[str, str]) -> dict:
    """The runner's fields as the agent type fills them (`model_ids`: model name -> id; a
    name no model has stays as it is), each other field its declared default."""
    primary = model_ids.get(agent_type.primary_model, agent_type.primary_model)
    fallbacks = [model_ids.get(name, name) for name in agent_type.fallback_models or []
                 if isinstance(name, str)]
    persona = agent_type.personality_prompt
    config = {}
    for name, field in fields_of(schema).items():
        kind = field.get("type")
        if kind == MODEL_FALLBACK_SELECTOR and primary:
            config[name] = {"primary": primary, "fallbacks": fallbacks}
        elif kind in LLM_MODEL_SELECTORS and primary:
            config[name] = primary
        elif kind == PROMPT_EDITOR and persona:
            config[name] = [{"role": "system", "content": persona}]
        elif kind == "mcp-server-multi-selector" and agent_type.mcp_servers:
            config[name] = list(agent_type.mcp_servers)
        elif kind == "knowledge-base-multi-selector" and agent_type.knowledge_bases:
            config[name] = list(agent_type.knowledge_bases)
        elif kind == "knowledge-base-selector" and agent_type.knowledge_bases:
            config[name] = agent_type.knowledge_bases[0]
        elif "default" in field:
            config[name] = field["default"]
    return config


def rerank_model_names(config: Mapping, schema) -> list[str]:
    return [config[name] for name, field in fields_of(schema).items()
            if field.get("type") == RERANK_MODEL_SELECTOR and isinstance(config.get(name), str)]


def with_model_ids(config: Mapping, schema, model_ids: Mapping[str, str]) -> dict:
    config = dict(config)
    for name, field in fields_of(schema).items():
        if field.get("type") == RERANK_MODEL_SELECTOR and config.get(name) in model_ids:
            config[name] = model_ids[config[name]]
    return config


def _secret_names(schema) -> set[str]:
    return {name for name, field in fields_of(schema).items() if field.get("type") == SECRET}


def _is_sealed(value) -> bool:
    return isinstance(value, Mapping) and set(value) == {SEALED}


def sealed(config: Mapping, schema, stored: Mapping | None = None) -> dict:
    """`config` to store: each secret given encrypted; a secret not given keeps its stored
    value (a client that never saw it need not send it back), `null` clears it. A stored
    secret the schema no longer names (or a schema that cannot be read) is kept the same way."""
    config, stored = dict(config), stored or {}
    secrets = _secret_names(schema) | {name for name, value in stored.items() if _is_sealed(value)}
    for name in secrets:
        if name not in config:
            if _is_sealed(stored.get(name)):
                config[name] = stored[name]
        elif config[name] is None:
            del config[name]
        elif not _is_sealed(config[name]):
            config[name] = {SEALED: encrypt(config[name], SECRET_LABEL)}
    return config


def opened(config: Mapping) -> dict:
    """The stored config as the runner gets it: its secrets decrypted."""
    return {name: decrypt(value[SEALED], SECRET_LABEL) if _is_sealed(value) else value
            for name, value in config.items()}


def shown(config: Mapping) -> dict:
    """The stored config as anyone may see it: without its secrets."""
    return {name: value for name, value in config.items() if not _is_sealed(value)}


def secrets_set(config: Mapping) -> list[str]:
    """The names of the secrets the stored config holds."""
    return sorted(name for name, value in config.items() if _is_sealed(value))


CONFIG_FIELDS = ((AgentType, "runner_config"), (Binding, "runner_config"),
                 (PluginInstallation, "config"))


def rotate_secrets_sync(fields=CONFIG_FIELDS) -> tuple[int, list[str]]:
    """Re-encrypt the config secrets of these `(model, field)`s (agent types', bindings',
    plugins' by default) under the current `SECRET_KEY`: how many rows were, and the names
    of those with a secret no key in use can read (left as is)."""
    done, unreadable = 0, []
    for model, field in fields:
        for row in model.objects.exclude(**{field: {}}):
            config = getattr(row, field) or {}
            if not secrets_set(config):
                continue
            try:
                setattr(row, field, {
                    name: {SEALED: rotated(value[SEALED], SECRET_LABEL)} if _is_sealed(value)
                    else value for name, value in config.items()})
            except UnreadableKey:
                unreadable.append(str(row))
                continue
            row.save(update_fields=[field])
            done += 1
    return done, unreadable
