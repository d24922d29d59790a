"""Schemathesis hooks of the fuzz run (tests/e2e/fuzz.py, `SCHEMATHESIS_HOOKS`).

Every generated request is signed in, so every operation is fuzzed past its door: with the
run's token (`FUZZ_TOKEN`), except `auth/logout`, which revokes the token it is sent with and
gets a fresh sign-in each time. The `signed_in` check fails any 401 to a request sent with one
of those tokens, outside the operations that take credentials in their body (schemathesis
also sends some requests without the token on purpose, to see them refused).
"""

import json
import os

import httpx
import schemathesis

# Operations whose 401 answers the credentials in their body (a password, a refresh token),
# not the request's token: LangHost's own and the LangBot-shaped `user/init` and `user/auth`.
CREDENTIAL_OPERATIONS = ("/auth/login", "/auth/refresh", "/auth/logout", "/auth/register",
                         "/invitations/", "/user/init", "/user/auth")
# A body past the server's upload limit is refused unread, before the request is signed in
# (413, tests of their own: runners/tests/test_request_limits.py); generated ones stay below it.
BODY_BYTES_MAX = 32 * 1024


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
