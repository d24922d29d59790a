"""Token counts of one call, the same whatever the provider."""

from dataclasses import dataclass


@dataclass
class Usage:
    """`input_tokens` counts every prompt token, cached ones included; `cached_tokens` is the
    part read from the provider's prompt cache (billed at the cached price)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0

    def as_dict(self) -> dict:
        """The SDK's `LLMTokenUsage` shape, with the cached count as an extra field."""
        return {
            "prompt_tokens": self.input_tokens,
            "completion_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
            "cached_tokens": self.cached_tokens,
        }
