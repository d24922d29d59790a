"""The data dir: database, secret key, runtime working dir, artifacts.

Settings only read it, so importing them writes nothing. The process entry points
(`manage.py`, `langhost/asgi.py`) call `prepare()` before Django loads the settings.
"""

import contextlib
import os
import secrets
import tempfile
from pathlib import Path

from langhost.base import process_secrets

BASE_DIR = Path(__file__).resolve().parents[2]
SECRET_KEY_FILE = "secret_key"


def location() -> Path:
    return Path(os.environ.get("LANGHOST_DATA_DIR", BASE_DIR / "data")).resolve()


def stored_secret_key(data_dir: Path) -> str:
    """The key `prepare()` generated into `data_dir`, or "" before it did."""
    try:
        return (data_dir / SECRET_KEY_FILE).read_text().strip()
    except FileNotFoundError:
        return ""


def prepare() -> None:
    """Create the data dir and, unless `DJANGO_SECRET_KEY` is set, its secret key (once)."""
    data_dir = location()
    data_dir.mkdir(parents=True, exist_ok=True)
    if process_secrets.value("DJANGO_SECRET_KEY") or stored_secret_key(data_dir):
        return
    # Written aside (mode 0600), then linked into place: processes starting together all end
    # up with the one key that got there first, never a half-written one.
    with tempfile.NamedTemporaryFile("w", dir=data_dir, prefix=".secret_key-") as draft:
        draft.write(secrets.token_urlsafe(50))
        draft.flush()
        os.fsync(draft.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(draft.name, data_dir / SECRET_KEY_FILE)
