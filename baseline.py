"""Reference scores: ``python baseline.py`` (``--help`` for the flags).

The random and heuristic agents (and the LLM agent when ``HF_TOKEN``/``API_KEY`` is set), k trials
per ticket, as server-side runs graded by the service; a Markdown table (or ``--json``) on stdout.
The logic lives in :mod:`client.baseline`.
"""

import sys

from client.baseline import main

if __name__ == "__main__":
    sys.exit(main())
