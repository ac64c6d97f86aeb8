"""The test provider's URLs: DOT under /o/ (issuer http://127.0.0.1:PORT/o) and Django's login.

DOT's discovery document does not name its device authorization endpoint, which it
serves all the same; a deployer who offers device sign-in names it there, as this does.
"""

import json

from django.http import HttpRequest, HttpResponse
from django.urls import include, path, reverse
from oauth2_provider.views import ConnectDiscoveryInfoView


class DiscoveryWithDeviceSignIn(ConnectDiscoveryInfoView):
    """DOT's discovery document, with `device_authorization_endpoint` (RFC 8628 4)."""

    def get(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        document = json.loads(response.content)
        device = reverse("oauth2_provider:device-authorization")
        document["device_authorization_endpoint"] = request.build_absolute_uri(device)
        response.content = json.dumps(document).encode()
        return response


urlpatterns = [
    path("o/.well-known/openid-configuration", DiscoveryWithDeviceSignIn.as_view()),
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    path("accounts/", include("django.contrib.auth.urls")),
]
