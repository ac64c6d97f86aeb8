"""A tiny Django project serving django-oauth-toolkit's OpenID provider to the interop tests."""
