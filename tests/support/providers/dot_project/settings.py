"""Django settings of the test provider: OIDC on, PKCE, rotating refresh tokens, short tokens.

Everything that varies per run comes from the JSON file named by INTEROP_DOT_SETTINGS
(written by support.providers.dot): the folder of the SQLite database, the RSA key,
the access-token lifetime. Nothing here is for production.
"""

import json
import os
from pathlib import Path

RUN = json.loads(Path(os.environ["INTEROP_DOT_SETTINGS"]).read_text())

SECRET_KEY = RUN["django_secret_key"]
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
ROOT_URLCONF = "dot_project.urls"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "dot_project.grants.TokenRequestLog",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [Path(__file__).parent / "templates"],
        "APP_DIRS": True,  # DOT's own pages: device sign-in's code and confirmation
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": Path(RUN["folder"]) / "db.sqlite3"}
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
LOGIN_URL = "/accounts/login/"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # a test user: fast

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": RUN["signing_key_pem"],
    "OAUTH2_VALIDATOR_CLASS": "dot_project.grants.ClaimsValidator",
    "SCOPES": {"openid": "OpenID Connect", "profile": "Your name", "email": "Your email"},
    "ACCESS_TOKEN_EXPIRE_SECONDS": RUN["access_token_ttl"],
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    # Device sign-in (RFC 8628), for its own application (DOT's have one grant type
    # each); a poll a second rather than every five keeps the tests short.
    "OAUTH_DEVICE_VERIFICATION_URI": RUN["device_verification_uri"],
    "OAUTH_DEVICE_VERIFICATION_URI_COMPLETE": (
        RUN["device_verification_uri"] + "?user_code={user_code}"
    ),
    "DEVICE_FLOW_INTERVAL": 1,
    # A service account's tokens (the client credentials grant) live a short while of
    # their own, so a test sees several renewals in seconds.
    "EXTRA_SERVER_KWARGS": {
        "token_expires_in": lambda request: (
            RUN["client_credentials_ttl"]
            if request.grant_type == "client_credentials"
            else RUN["access_token_ttl"]
        )
    },
}

# A server error's traceback goes to the provider's stderr.log, where a failing test shows it.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {"django.request": {"handlers": ["stderr"], "level": "ERROR"}},
}
