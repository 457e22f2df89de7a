"""The local path a `file:` URL names: where a JWKS file (broker side) or a token file (client side) is read from.

Kept apart from `jwks.py` so that a client's login does not import PyJWT and the cryptography it loads.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from pathlib import Path

__all__ = ["file_url_path"]


def file_url_path(url: str) -> Path:
    """The local path a `file:` URL names."""
    return Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
