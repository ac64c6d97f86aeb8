"""Service-manager files shipped in the package (see cli/_service.py)."""
