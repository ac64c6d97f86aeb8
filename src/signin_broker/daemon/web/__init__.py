"""The daemon's loopback web surface: the sign-in page, loaded at a browser's first visit.

BEGIN_PATH is here, where the daemon reads it at start (status names the sign-in URL),
so that the page's HTML and its helpers (pages.py, with html's 2,000 entities) load only
with the page.
"""

BEGIN_PATH = "/auth/oauth2/id-provider"  # where the page begins a browser sign-in
