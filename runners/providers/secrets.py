"""Secrets at rest (provider API keys, MCP servers' env and headers): Fernet-encrypted with a
key derived from `SECRET_KEY` and a label of their kind.

Keys are never logged and never leave this module except to the SDK client of a call.
Changing `SECRET_KEY` makes stored keys unreadable: set them again (or use `api_key_env`).
"""

import base64
import os

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from runners.models import ModelProvider

# A fixed label keeps this key apart from anything else derived from SECRET_KEY.
_INFO = b"langhost.model-provider.api-key"


class UnreadableKey(Exception):
    """The stored key (or secret) was encrypted under another SECRET_KEY."""


def _fernet(info: bytes = _INFO) -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(
        settings.SECRET_KEY.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


def encrypt(plaintext: str, label: bytes) -> str:
    """`plaintext` encrypted under the key for secrets of kind `label`."""
    return _fernet(label).encrypt(plaintext.encode()).decode()


def decrypt(token: str, label: bytes) -> str:
    """The plaintext of `encrypt(plaintext, label)`; `UnreadableKey` if SECRET_KEY changed."""
    try:
        return _fernet(label).decrypt(token.encode()).decode()
    except InvalidToken:
        raise UnreadableKey("A stored secret cannot be decrypted (SECRET_KEY changed?); "
                            "set it again.") from None


def set_api_key(provider: ModelProvider, plaintext: str) -> None:
    """Store `plaintext` encrypted on `provider` (the caller saves it); empty removes the key."""
    plaintext = plaintext.strip()
    provider.api_key_encrypted = _fernet().encrypt(plaintext.encode()).decode() if plaintext else ""


def api_key(provider: ModelProvider) -> str:
    """The provider's key: the stored one, else the variable `api_key_env` names; "" if none."""
    if provider.api_key_encrypted:
        try:
            return _fernet().decrypt(provider.api_key_encrypted.encode()).decode()
        except InvalidToken:
            raise UnreadableKey(
                f"The API key stored for provider '{provider.name}' cannot be decrypted "
                "(SECRET_KEY changed?); set it again.") from None
    if provider.api_key_env:
        return os.environ.get(provider.api_key_env, "")
    return ""
