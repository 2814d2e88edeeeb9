"""The stdout contract (the hackathon-era log format): exactly three kinds of line, nothing else::

    [START] task=<task_id> env=<benchmark> model=<model_name>
    [STEP] step=<n> action=<compact json|null> reward=<0.00> done=<true|false> error=<msg|null>
    [END] success=<true|false> steps=<n> score=<0.000> rewards=<r1,r2,...>

``score`` is clamped into [0.001, 0.999]: the hackathon checker rejects a task score of exactly 0
or 1 (the exact score is ``GET /grader``'s). Rewards are printed as the server sent them.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

SCORE_SHOWN_MIN, SCORE_SHOWN_MAX = 0.001, 0.999


def one_line(text: Any, limit: int = 300) -> str:
    """A single log-safe line: no CR/LF/tabs, collapsed whitespace, bounded length."""
    s = re.sub(r"\s+", " ", str(text)).strip()
    return s if len(s) <= limit else s[: limit - 3] + "..."


def compact_json(value: Any) -> str:
    # json.dumps escapes newlines inside strings, so the result is always one line.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


def _bool(b: bool) -> str:
    return "true" if b else "false"


def start_line(task_id: str, benchmark: str, model: str) -> str:
    return f"[START] task={task_id} env={benchmark} model={model}"


def step_line(n: int, action: dict[str, Any] | None, reward: float, done: bool, error: str | None) -> str:
    action_s = "null" if action is None else compact_json(action)
    error_s = "null" if not error else one_line(error)
    return f"[STEP] step={n} action={action_s} reward={reward:.2f} done={_bool(done)} error={error_s}"


def end_line(success: bool, steps: int, score: float, rewards: list[float]) -> str:
    shown = min(max(score, SCORE_SHOWN_MIN), SCORE_SHOWN_MAX)
    rewards_s = ",".join(f"{r:.2f}" for r in rewards)
    return f"[END] success={_bool(success)} steps={steps} score={shown:.3f} rewards={rewards_s}"


def emit(line: str) -> None:
    """One complete line per write (play_episode writes an episode's lines back to back)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
