"""How every benchmark server is served: exactly like ``python -m service.app`` does it.

``service.app.serve`` runs uvicorn with the settings read from the environment (``LOG_LEVEL``,
``ACCESS_LOG``, ``WS_PER_MESSAGE_DEFLATE``) and uvicorn's defaults for everything else
(loop=auto → uvloop, http=auto → httptools, one worker). The ceiling and the peer go through this
same call so the comparison is only about what happens inside the app.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any


def serve(app: Any, description: str) -> None:
    """Parse ``--host/--port`` (defaults from HOST/PORT) and run ``app`` like service.app does."""
    from service.app import serve as serve_app
    from service.settings import Settings

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "7860")))
    args = parser.parse_args()
    serve_app(app, dataclasses.replace(Settings.from_env(), host=args.host, port=args.port, workers=1))
