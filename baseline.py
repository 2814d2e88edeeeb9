"""Reference scores: ``.venv/bin/python baseline.py`` (``--help`` for the flags).

The random and heuristic agents (and the LLM agent when ``HF_TOKEN``/``API_KEY`` is set), k trials
per ticket, as server-side runs graded by the service; a Markdown table (or ``--json``) on stdout.
The logic lives in :mod:`client.baseline`.
"""

import sys

try:
    from client.baseline import main
except ModuleNotFoundError as missing:  # a Python without the project's dependencies (httpx, openai, ...)
    sys.exit(
        f"error: {missing}. Run this with the project's virtualenv: `make run` (or `make .venv/.installed-serve`) "
        f"sets it up, then `.venv/bin/python {' '.join(sys.argv)}`; or `pip install -r requirements.txt` first."
    )

if __name__ == "__main__":
    sys.exit(main())
