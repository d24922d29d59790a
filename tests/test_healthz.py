"""`GET /healthz`: a web process says whether it can serve, without signing in."""

import pytest
from django.test import Client

from runners.runtime.process import free_port


def test_healthz_answers_ok_without_signing_in(db):
    response = Client().get("/healthz")

    assert response.status_code == 200
    body = response.json()
    assert body.pop("confinement").keys() == {"plugins", "box"}
    assert body == {"status": "ok", "database": "ok", "channel_layer": "ok"}


def test_healthz_is_503_naming_an_unreachable_channel_layer(db, settings):
    pytest.importorskip("channels_redis", reason="needs the test extras: `make install-test`")
    settings.CHANNEL_LAYERS = {"default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [f"redis://127.0.0.1:{free_port()}/0"]},  # nobody listens there
    }}

    response = Client().get("/healthz")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["database"] == "ok"
    assert body["channel_layer"].startswith("down: ")
