"""Lock-outs that lock out attackers: failures count per account and address, an account under
attack from everywhere is slowed rather than locked, and where it signed in before it is not
slowed at all; behind a trusted proxy the client's own address counts."""

import pytest
from django.core.cache import cache

from accounts.signin import ClientAddressThrottle, client_address
from tests.timing import scaled

pytestmark = pytest.mark.django_db

WRONG = "not-the-password"
HOME, ATTACKER, ELSEWHERE = "198.51.100.10", "203.0.113.66", "192.0.2.44"


def login(client, email, password, address):
    return client.post("/api/v1/auth/login", {"email": email, "password": password},
                       format="json", REMOTE_ADDR=address)


def test_ten_failures_from_one_address_do_not_stop_the_owner_elsewhere(anon_client, user,
                                                                       password):
    for _ in range(10):
        login(anon_client, user.email, WRONG, ATTACKER)

    assert login(anon_client, user.email, password, ATTACKER).status_code == 429
    assert login(anon_client, user.email, password, HOME).status_code == 200


def test_an_account_failing_from_everywhere_is_slowed_not_locked_and_home_is_not_slowed(
        anon_client, user, password, settings):
    settings.LANGHOST_SIGNIN_ACCOUNT_FAILURES = 6
    settings.LANGHOST_SIGNIN_MAX_WAIT_SECONDS = scaled(60)
    assert login(anon_client, user.email, password, HOME).status_code == 200  # known-good
    for attacker in range(8):  # 8 addresses, one failure each: none is locked as a pair
        login(anon_client, user.email, WRONG, f"203.0.113.{attacker}")

    slowed = login(anon_client, user.email, password, ELSEWHERE)
    at_home = login(anon_client, user.email, password, HOME)

    assert slowed.status_code == 429 and "for this account" in slowed.json()["detail"]
    assert 0 < int(slowed["Retry-After"]) <= scaled(60)
    assert at_home.status_code == 200


def test_a_slowed_account_signs_in_once_its_wait_is_over(anon_client, user, password,
                                                        settings):
    settings.LANGHOST_SIGNIN_ACCOUNT_FAILURES = 2
    settings.LANGHOST_SIGNIN_MAX_WAIT_SECONDS = 0
    for attacker in range(3):
        login(anon_client, user.email, WRONG, f"203.0.113.{attacker}")

    assert login(anon_client, user.email, password, ELSEWHERE).status_code == 200


def test_behind_a_trusted_proxy_the_forwarded_client_counts(rf, settings):
    settings.LANGHOST_TRUSTED_PROXIES = "127.0.0.1, 10.0.0.0/8"
    proxied = rf.get("/", REMOTE_ADDR="127.0.0.1",
                     HTTP_X_FORWARDED_FOR="198.51.100.7, 10.1.2.3")
    spoofed = rf.get("/", REMOTE_ADDR="203.0.113.9", HTTP_X_FORWARDED_FOR="127.0.0.1")

    assert client_address(proxied) == "198.51.100.7"
    assert client_address(spoofed) == "203.0.113.9"  # not a proxy of ours: its header is not
    settings.LANGHOST_TRUSTED_PROXIES = ""
    assert client_address(proxied) == "127.0.0.1"


def test_registration_is_throttled_per_address(anon_client, monkeypatch):
    cache.clear()
    monkeypatch.setattr(ClientAddressThrottle, "THROTTLE_RATES", {"register": "3/hour"})
    answers = [anon_client.post("/api/v1/auth/register", {
        "email": f"new{n}@example.com", "password": "Sturdy-Passw0rd-42"}, format="json",
        REMOTE_ADDR=ATTACKER).status_code for n in range(4)]
    other = anon_client.post("/api/v1/auth/register", {
        "email": "neighbour@example.com", "password": "Sturdy-Passw0rd-42"}, format="json",
        REMOTE_ADDR=HOME)

    assert answers == [202, 202, 202, 429]
    assert other.status_code == 202
