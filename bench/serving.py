"""How every benchmark server is served: exactly like ``python -m service.app`` does it.

``service.app.main`` calls ``uvicorn.run(app, host=..., port=..., log_level=...)`` with uvicorn's
defaults for everything else (loop=auto → uvloop, http=auto → httptools, ws=auto, access log on,
one worker). The ceiling and the peer go through this same call so the comparison is only about
what happens inside the app.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any


def serve(app: Any, description: str) -> None:
    """Parse ``--host/--port`` (defaults from HOST/PORT) and run ``app`` like service.app does."""
    import uvicorn

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "7860")))
    args = parser.parse_args()
    level = (os.environ.get("LOG_LEVEL") or "INFO").upper()
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    uvicorn.run(app, host=args.host, port=args.port, log_level=level.lower())
