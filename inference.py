"""Evaluate an agent against ecomm-support-env: ``python inference.py`` (``--help`` for the flags).

The evaluation client lives in the :mod:`client` package; this script is its command line
(:func:`client.cli.main`). stdout carries the hackathon-era log lines and nothing else — one whole
``[START]`` … ``[STEP]`` … ``[END]`` block per episode, whatever the concurrency (see
:mod:`client.logformat`); progress and summaries go to stderr. See ``docs/inference-notes.md``.
"""

import sys

from client.cli import main

if __name__ == "__main__":
    sys.exit(main())
