"""The test provider's URLs: DOT under /o/ (issuer http://127.0.0.1:PORT/o) and Django's login."""

from django.urls import include, path

urlpatterns = [
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("accounts/", include("django.contrib.auth.urls")),
]
