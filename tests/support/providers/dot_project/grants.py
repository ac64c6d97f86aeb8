"""What the test provider adds to django-oauth-toolkit: a log of token requests, and claims.

The log is one JSON line on stdout per token request: its grant type, the status of
the answer, whether it carried a refresh token, and the OAuth error code if any. The
values of tokens and codes are never printed. When the test has dropped the pause flag
file, the next refresh pauses the whole process (SIGSTOP) between computing its answer
and sending it: a provider host that stalls mid-refresh, resumed by the test.
"""

import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qs

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from oauth2_provider.oauth2_validators import OAuth2Validator


class TokenRequestLog:
    """Middleware: one line per POST to the token endpoint, so a test can count grants."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method != "POST" or not request.path.endswith("/token/"):
            return self.get_response(request)
        form = parse_qs(request.body.decode(errors="replace"))  # body first: DOT reads it later
        response = self.get_response(request)
        try:
            answer = json.loads(response.content)
        except ValueError:
            answer = {}
        record = {
            "event": "token",
            "grant_type": form.get("grant_type", [""])[0],
            "status": response.status_code,
            "refresh_token": "refresh_token" in answer,
        }
        if "error" in answer:
            record["error"] = answer["error"]
        say(record)
        if record["grant_type"] == "refresh_token":
            pause_if_asked()
        return response


def say(record: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def pause_if_asked() -> None:
    """Stop this process (the test sends SIGCONT) if the pause flag is there; remove it."""
    try:
        Path(settings.RUN["pause_flag"]).unlink()
    except FileNotFoundError:
        return
    say({"event": "paused"})
    os.kill(os.getpid(), signal.SIGSTOP)


class ClaimsValidator(OAuth2Validator):
    """The user's name and email, released under the profile and email scopes."""

    def get_additional_claims(self, request):  # type: ignore[no-untyped-def]
        user = request.user
        return {"name": user.get_full_name(), "email": user.email, "email_verified": True}
