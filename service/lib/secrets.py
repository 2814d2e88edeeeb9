"""How the service stores the secrets it hands out (run tokens, episode tokens, submitter keys)."""

from __future__ import annotations

import hashlib


def hash_secret(secret: str) -> str:
    """How tokens and keys are stored: only their SHA-256 (they are random, so no salt is needed)."""
    return hashlib.sha256(secret.encode()).hexdigest()
