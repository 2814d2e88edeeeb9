"""The local record of a created run (its token is a credential: mode 0600), for ``--resume``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def save_run_state(state_dir: Path, run: dict[str, Any], env_url: str, agent: str, model: str) -> Path:
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / f"{run['run_id']}.json"
    record = {
        "run_id": run["run_id"],
        "run_token": run["run_token"],
        "env_url": env_url,
        "agent": agent,
        "model": model,
        "split": run.get("split"),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(record, fh, indent=2)
    return path


def load_run_state(state_dir: Path, run_id: str) -> dict[str, Any] | None:
    path = state_dir / f"{run_id}.json"
    if not path.exists():
        return None
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded
