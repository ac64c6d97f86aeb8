"""The test provider's admin revokes a user: every refresh token revoked, every access token gone.

Usage (with tests/support/providers on PYTHONPATH): python -m dot_project.revoke
SETTINGS.json SUB, beside the running provider (they share its SQLite database). It
uses DOT's own RefreshToken.revoke(), which its revocation endpoint calls too, and
prints how many tokens it revoked as one JSON line.
"""

import json
import sys

from dot_project.serve import configure


def main() -> None:
    settings_file, sub = sys.argv[1], sys.argv[2]
    configure(settings_file)
    from oauth2_provider.models import get_access_token_model, get_refresh_token_model

    refresh_tokens = get_refresh_token_model().objects.filter(user__pk=sub, revoked__isnull=True)
    revoked = 0
    for token in refresh_tokens:
        token.revoke()  # its access token goes with it
        revoked += 1
    access_tokens, _ = get_access_token_model().objects.filter(user__pk=sub).delete()
    print(
        json.dumps({"event": "revoked", "refresh_tokens": revoked, "access_tokens": access_tokens})
    )


if __name__ == "__main__":
    main()
