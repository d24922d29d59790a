"""Secrets at rest (provider API keys, MCP servers' env and headers): Fernet-encrypted with a
key derived from `SECRET_KEY` and a label of their kind.

Keys are never logged and never leave this module except to the SDK client of a call.
A secret encrypted under a key in `SECRET_KEY_FALLBACKS` still decrypts, so the secret key can
be rotated: the old one moves to the fallbacks, `manage.py rotate_secrets` re-encrypts every
stored secret under the new one, and then the fallback can go.
"""

import base64
import json
import os

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from runners.models import ModelProvider
from runners.models.providers import key_variable_problem

# A fixed label per kind of secret keeps their keys apart from anything else derived from
# SECRET_KEY.
API_KEY_LABEL = b"langhost.model-provider.api-key"
EXTRA_HEADERS_LABEL = b"langhost.model-provider.extra-headers"


class UnreadableKey(Exception):
    """The stored key (or secret) was encrypted under another SECRET_KEY."""


def _derived(secret_key: str, info: bytes) -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(
        secret_key.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


def _fernet(info: bytes = API_KEY_LABEL) -> MultiFernet:
    """Encrypts under `SECRET_KEY`; decrypts under it or any of `SECRET_KEY_FALLBACKS`."""
    keys = [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
    return MultiFernet([_derived(key, info) for key in keys])


def encrypt(plaintext: str, label: bytes) -> str:
    """`plaintext` encrypted under the key for secrets of kind `label`."""
    return _fernet(label).encrypt(plaintext.encode()).decode()


def decrypt(token: str, label: bytes) -> str:
    """The plaintext of `encrypt(plaintext, label)`; `UnreadableKey` if it was encrypted under
    neither `SECRET_KEY` nor a fallback."""
    try:
        return _fernet(label).decrypt(token.encode()).decode()
    except InvalidToken:
        raise UnreadableKey("A stored secret cannot be decrypted (SECRET_KEY changed?); "
                            "set it again.") from None


def rotated(token: str, label: bytes) -> str:
    """`token` encrypted again under the current `SECRET_KEY` ("" stays ""); `UnreadableKey`
    if no key in use can read it."""
    if not token:
        return token
    try:
        return _fernet(label).rotate(token.encode()).decode()
    except InvalidToken:
        raise UnreadableKey("A stored secret cannot be decrypted under SECRET_KEY or any "
                            "fallback.") from None


def set_api_key(provider: ModelProvider, plaintext: str) -> None:
    """Store `plaintext` encrypted on `provider` (the caller saves it); empty removes the key."""
    plaintext = plaintext.strip()
    provider.api_key_encrypted = encrypt(plaintext, API_KEY_LABEL) if plaintext else ""


def api_key(provider: ModelProvider) -> str:
    """The provider's key: the stored one, else the variable `api_key_env` names; "" if none."""
    if provider.api_key_encrypted:
        try:
            return decrypt(provider.api_key_encrypted, API_KEY_LABEL)
        except UnreadableKey:
            raise UnreadableKey(
                f"The API key stored for provider '{provider.name}' cannot be decrypted "
                "(SECRET_KEY changed?); set it again.") from None
    if provider.api_key_env:
        if problem := key_variable_problem(provider.api_key_env):
            raise UnreadableKey(f"Provider '{provider.name}': {problem}.")
        return os.environ.get(provider.api_key_env, "")
    return ""


def set_extra_headers(provider: ModelProvider, headers: dict[str, str]) -> None:
    """Replace the provider's extra HTTP headers (the caller saves it); `{}` removes them.
    Write-only like its key: they often carry credentials."""
    provider.extra_headers_encrypted = (encrypt(json.dumps(headers), EXTRA_HEADERS_LABEL)
                                        if headers else "")


def extra_headers(provider: ModelProvider) -> dict[str, str]:
    """The provider's extra headers, values included: for its requests only."""
    if not provider.extra_headers_encrypted:
        return {}
    try:
        return json.loads(decrypt(provider.extra_headers_encrypted, EXTRA_HEADERS_LABEL))
    except UnreadableKey:
        raise UnreadableKey(f"The extra headers stored for provider '{provider.name}' cannot "
                            "be decrypted (SECRET_KEY changed?); set them again.") from None


def extra_header_names(provider: ModelProvider) -> list[str]:
    try:
        return sorted(extra_headers(provider))
    except UnreadableKey:  # nothing to show; the next call says why
        return []


def rotate_stored_sync(rows, labels: dict[str, bytes]) -> tuple[int, list[str]]:
    """Re-encrypt the secrets of `rows` (field name → its label) under the current
    `SECRET_KEY`: how many rows were, and the names of those with a secret no key in use can
    read (left as they are)."""
    done, unreadable = 0, []
    for row in rows:
        try:
            rotations = {field: rotated(getattr(row, field), label)
                         for field, label in labels.items()}
        except UnreadableKey:
            unreadable.append(row.name)
            continue
        for field, token in rotations.items():
            setattr(row, field, token)
        row.save(update_fields=list(labels))
        done += 1
    return done, unreadable


def rotate_api_keys_sync() -> tuple[int, list[str]]:
    """`rotate_stored_sync` for providers' keys and extra headers."""
    return rotate_stored_sync(
        ModelProvider.objects.exclude(api_key_encrypted="", extra_headers_encrypted=""),
        {"api_key_encrypted": API_KEY_LABEL, "extra_headers_encrypted": EXTRA_HEADERS_LABEL})
