"""The environment's name and version, in one place: the package's own (``pyproject.toml``'s
``[project]``; ``openenv.yaml`` repeats both, and ``tests/api/test_api_http.py`` checks that they agree).

GET /metadata, the OpenAPI document, MCP's ``serverInfo`` and the start-up log read them here.
"""

from __future__ import annotations

from importlib.metadata import version

ENV_NAME = "ecomm-support-env"
ENV_VERSION = version(ENV_NAME)
