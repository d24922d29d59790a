"""Where models come from: providers (an endpoint and its key) and the models agents name."""

import re
import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token (RFC 9110)


def key_variable_problem(name: str) -> str | None:
    """Why the environment variable `name` may not hold a provider's key, if it may not: only
    variables named for it (`LANGHOST_PROVIDER_KEY_ENV_PREFIX`) may, never the host's own."""
    prefix = settings.LANGHOST_PROVIDER_KEY_ENV_PREFIX
    if not ENV_NAME.match(name):
        return f"{name!r} is not an environment variable name"
    if not name.startswith(prefix) or name == prefix:
        return f"{name!r} is not allowed: a provider's key variable must start with {prefix}"
    return None


def validate_key_variable(name: str) -> None:
    if problem := key_variable_problem(name):
        raise ValidationError(problem)


class ModelProvider(models.Model):
    """An LLM endpoint: any OpenAI-compatible server, or Anthropic's API.

    The API key and the extra headers are write-only: stored encrypted
    (`runners.providers.secrets`), or, for the key, read from the environment variable
    `api_key_env` names; never shown in responses, pages or logs.
    """

    class Kind(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible"
        ANTHROPIC = "anthropic", "Anthropic"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.OPENAI)
    base_url = models.URLField(
        max_length=500, blank=True, default="",
        help_text="e.g. https://api.openai.com/v1, http://127.0.0.1:11434/v1 (Ollama); empty: "
                  "the SDK's default for the kind.")
    api_key_encrypted = models.TextField(blank=True, default="", editable=False)
    api_key_env = models.CharField(
        max_length=100, blank=True, default="", validators=[validate_key_variable],
        help_text="Take the API key from this environment variable instead of storing it "
                  "(its name must start with LANGHOST_PROVIDER_KEY_ENV_PREFIX, by default "
                  "LANGHOST_PROVIDER_).")
    timeout = models.FloatField(default=60.0, help_text="Seconds for one call, at most.")
    # Extra HTTP headers of its requests: write-only like the key (they often carry one).
    extra_headers_encrypted = models.TextField(blank=True, default="", editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted or self.api_key_env)


class LLMModel(models.Model):
    """A model agents name (`AgentType.primary_model`, `fallback_models`); its UUID is the
    `llm_model_uuid` plugins see."""

    class Type(models.TextChoices):
        CHAT = "chat"
        EMBEDDING = "embedding"
        RERANK = "rerank"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200, unique=True,
                            help_text="What agent types name, e.g. claude-3-sonnet.")
    provider = models.ForeignKey(ModelProvider, on_delete=models.PROTECT, related_name="models")
    upstream_model = models.CharField(max_length=200,
                                      help_text="The provider's id for it, e.g. gpt-4o-mini.")
    model_type = models.CharField(max_length=16, choices=Type.choices, default=Type.CHAT)
    abilities = models.JSONField(default=list, blank=True,
                                 help_text='Any of "tools", "vision", "streaming", "reasoning", "json_schema" '
                                           "(takes OpenAI's JSON-schema response format).")
    context_window = models.PositiveIntegerField(default=8192)
    input_price_per_mtok = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    output_price_per_mtok = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    cached_price_per_mtok = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "LLM model"

    def __str__(self):
        return self.name
