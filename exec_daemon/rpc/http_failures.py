"""One line saying why an outgoing HTTP request (a download, an upload) failed.

Names what was tried (the host and port, never the whole URL: signed URLs carry their
credentials in the query) and what went wrong (httpx's error kind and its reason).
"""

from __future__ import annotations

import os
import urllib.parse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx


def where(url: str) -> str:
    """`host:port` of `url`, without its user info, path or query."""
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    host = parts.hostname or "?"
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if port else host


def http_failure(action: str, url: str, exc: httpx.HTTPError) -> str:
    """E.g. `cannot download from example.com:443: ConnectError: [Errno 111] Connection refused`."""
    try:
        url = str(exc.request.url)  # after a redirect, the host that failed
    except RuntimeError:
        pass
    reason = _os_reason(exc) or str(exc).replace(url, where(url)).strip() or "no reason given"
    return f"cannot {action} {where(url)}: {type(exc).__name__}: {reason}"


def _os_reason(exc: BaseException) -> str | None:
    """The system's word for it ("Connection refused"), which the async transport hides behind
    "All connection attempts failed"."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno is not None and cause.errno > 0:
            return os.strerror(cause.errno)
        cause = cause.__cause__ or cause.__context__
    return None
