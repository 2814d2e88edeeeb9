"""What uvicorn's log lines may say of a URL: the path, never its query string, and no episode id.

Query strings carry what must not be logged — a refused ``?run_token=`` or other secret (refused with
400, and revoked: :mod:`service.domain.episodes.credentials`), the MCP ``session_id`` of ``/ws``, and
``episode_id`` of ``/state`` and ``/grader``: a server-made episode id is its own capability. Paths carry
episode ids too (``/episodes/{id}``). With ``ACCESS_LOG=true`` (and in uvicorn's WebSocket lines, always)
each line keeps the path with the query string dropped and such ids replaced by ``…``; ``uvicorn_options``
installs :class:`RedactedUrls` on uvicorn's handlers.
"""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

from uvicorn.config import LOGGING_CONFIG

_EPISODE_PATH = re.compile(r"^(/episodes/)[^/?]+")


def redacted(path: str) -> str:
    """``path`` without its query string, an episode id in it replaced by ``…``."""
    return _EPISODE_PATH.sub(r"\1…", path.split("?", 1)[0])


class RedactedUrls(logging.Filter):
    """Rewrites every URL path argument of a log record (uvicorn passes the path with its query string)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            record.args = tuple(redacted(a) if isinstance(a, str) and a.startswith("/") else a for a in record.args)
        return True


def log_config() -> dict[str, Any]:
    """uvicorn's own logging configuration, with :class:`RedactedUrls` on its handlers."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redacted_urls"] = {"()": "service.lib.access_log.RedactedUrls"}
    for handler in config["handlers"].values():
        handler["filters"] = [*handler.get("filters", []), "redacted_urls"]
    return config
