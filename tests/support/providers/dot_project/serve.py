"""Run the test provider: migrate a fresh SQLite database, add the user and client, serve.

Usage (with tests/support/providers on PYTHONPATH): python -m dot_project.serve
SETTINGS.json PORT. It serves with Django's runserver on 127.0.0.1:PORT until killed.
"""

import os
import sys


def main() -> None:
    settings_file, port = sys.argv[1], sys.argv[2]
    configure(settings_file)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    seed()
    call_command("runserver", f"127.0.0.1:{port}", use_reloader=False, skip_checks=True)


def configure(settings_file: str) -> None:
    """Set Django up with the run's settings (serve and revoke alike)."""
    os.environ["INTEROP_DOT_SETTINGS"] = settings_file
    os.environ["DJANGO_SETTINGS_MODULE"] = "dot_project.settings"
    import django

    django.setup()


def seed() -> None:
    """The test user, a public client approved without a consent page, a device client, and
    a confidential client allowed the client credentials grant (a service account's)."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_application_model

    run = settings.RUN
    user = get_user_model().objects.create_user(
        run["username"], email=run["email"], password=run["password"], first_name="Test"
    )
    get_application_model().objects.create(
        client_id=run["client_id"],
        name="signin-broker",
        user=user,
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris=" ".join(run["redirect_uris"]),
        skip_authorization=True,
        algorithm="RS256",
    )
    application = get_application_model()
    application.objects.create(
        client_id=run["device_client_id"],
        name="signin-broker (device sign-in)",
        user=user,
        client_type="public",
        authorization_grant_type=application.GRANT_DEVICE_CODE,
        algorithm="RS256",
    )
    application.objects.create(
        client_id=run["kiosk_id"],
        client_secret=run["kiosk_secret"],  # hashed as it is saved
        name="a kiosk (service account)",
        client_type=application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=application.GRANT_CLIENT_CREDENTIALS,
    )


if __name__ == "__main__":
    main()
