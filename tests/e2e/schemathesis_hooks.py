"""Schemathesis hooks of the fuzz run (tests/e2e/fuzz.py, `SCHEMATHESIS_HOOKS`).

Every generated request is signed in, so every operation is fuzzed past its door: with the
run's token (`FUZZ_TOKEN`), except `auth/logout`, which revokes the token it is sent with and
gets a fresh sign-in each time. The `signed_in` check fails any 401 to a request sent with one
of those tokens, outside the operations that take credentials in their body (schemathesis
also sends some requests without the token on purpose, to see them refused).

Nothing the run sends reaches past this machine: each generated http(s) URL (a webhook, a
provider's base URL, an MCP server's) points at a closed port here instead (`HERE`), so no
request waits on a DNS server the machine may not have (a dropped query costs five seconds).
"""

import json
import os
import re

import httpx
import schemathesis

# Operations whose 401 answers the credentials in their body (a password, a refresh token),
# not the request's token: LangHost's own and the LangBot-shaped `user/init` and `user/auth`.
CREDENTIAL_OPERATIONS = ("/auth/login", "/auth/refresh", "/auth/logout", "/auth/register",
                         "/invitations/", "/user/init", "/user/auth")
# A body past the server's upload limit is refused unread, before the request is signed in
# (413, tests of their own: runners/tests/test_request_limits.py); generated ones stay below it.
BODY_BYTES_MAX = 32 * 1024
# An http(s) URL's scheme and authority (credentials, host, port).
URL_AUTHORITY = re.compile(r"^(https?://)[^/?#]*", re.IGNORECASE)
# Port 9 (discard) of the loopback address: nothing listens, so a connection is refused at once.
HERE = "127.0.0.1:9"


# The tokens this run signs in with.
_issued = {os.environ["FUZZ_TOKEN"]}


def _sign_in() -> str:
    answer = httpx.post(f"{os.environ['FUZZ_BASE_URL']}/api/v1/auth/login", timeout=60, json={
        "email": os.environ["FUZZ_EMAIL"], "password": os.environ["FUZZ_PASSWORD"]})
    answer.raise_for_status()
    _issued.add(answer.json()["access_token"])
    return answer.json()["access_token"]


@schemathesis.hook
def filter_case(context, case):
    return len(json.dumps(case.body, default=str)) < BODY_BYTES_MAX if case.body else True


def _kept_here(value):
    """`value` with every http(s) URL in it, at any depth, aimed at `HERE`."""
    if isinstance(value, str):
        return URL_AUTHORITY.sub(lambda match: match.group(1) + HERE, value)
    if isinstance(value, dict):
        return {key: _kept_here(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_kept_here(item) for item in value]
    return value


@schemathesis.hook
def before_call(context, case, kwargs):
    case.body = _kept_here(case.body)
    case.query = _kept_here(case.query)


@schemathesis.auth(refresh_interval=None)
class SignedIn:
    def get(self, case, context):
        return _sign_in() if case.path.endswith("/auth/logout") else os.environ["FUZZ_TOKEN"]

    def set(self, case, data, context):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}


@schemathesis.check
def signed_in(context, response, case):
    sent = response.request.headers.get("Authorization", "").removeprefix("Bearer ")
    if response.status_code == 401 and sent in _issued and not any(
            operation in case.path for operation in CREDENTIAL_OPERATIONS):
        raise AssertionError(f"401 from {case.method} {case.path}: the request was not let in")
