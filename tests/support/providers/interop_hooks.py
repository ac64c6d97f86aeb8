"""The person and the admin of the interop providers, as `signin-broker conformance` hooks.

Run with tests/ on PYTHONPATH: `python -m support.providers.interop_hooks login PROVIDER
URL REDIRECT_URI` opens the authorize URL in a scripted browser, fills in the provider's
login and consent pages as the interop sign-in does, and prints the address the
provider sends the browser back to. `revoke PROVIDER FOLDER ISSUER SUB` revokes the
user by the provider's own admin means. PROVIDER is a RealProvider's name
(django-oauth-toolkit, oidc-provider); FOLDER the running provider's folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

from signin_broker_testing.browser import Browser
from support.providers import RealProvider, through_provider_pages
from support.providers.dot import DjangoOAuthToolkit
from support.providers.node import NodeOidcProvider

PROVIDERS: dict[str, type[RealProvider]] = {
    provider.name: provider for provider in (DjangoOAuthToolkit, NodeOidcProvider)
}


def login(provider: type[RealProvider], url: str, redirect_uri: str) -> None:
    with Browser() as browser:
        response = browser.follow(browser.get(url), until=redirect_uri)
        print(through_provider_pages(browser, response, provider, redirect_uri))


def main(argv: list[str]) -> int:
    match argv:
        case ["login", name, url, redirect_uri] if name in PROVIDERS:
            login(PROVIDERS[name], url, redirect_uri)
        case ["revoke", name, folder, issuer, sub] if name in PROVIDERS:
            PROVIDERS[name].revoke_user(Path(folder), issuer, sub)
        case _:
            print(__doc__, file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
