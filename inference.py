"""Evaluate an agent against ecomm-support-env: ``.venv/bin/python inference.py`` (``--help`` for the flags).

The evaluation client lives in the :mod:`client` package; this script is its command line
(:func:`client.cli.main`). stdout carries the hackathon-era log lines and nothing else — one whole
``[START]`` … ``[STEP]`` … ``[END]`` block per episode, whatever the concurrency (see
:mod:`client.logformat`); progress and summaries go to stderr. See ``docs/inference-notes.md``.
"""

import sys

try:
    from client.cli import main
except ModuleNotFoundError as missing:  # a Python without the project's dependencies (httpx, openai, ...)
    sys.exit(
        f"error: {missing}. Run this with the project's virtualenv: `make run` (or `make .venv/.installed-serve`) "
        f"sets it up, then `.venv/bin/python {' '.join(sys.argv)}`; or `pip install -r requirements.txt` first."
    )

if __name__ == "__main__":
    sys.exit(main())
