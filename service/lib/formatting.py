"""How pages print numbers: with the one rounding rule the API and the Ladder use
(:func:`service.stats.rounded`, half up), so a page never shows a value the JSON rounds otherwise."""

from __future__ import annotations

from typing import Any

from service.stats import rounded


def rate(value: float | None, decimals: int = 3) -> str:
    """A rate as pages print it ("–" when not published)."""
    if value is None:
        return "–"
    return f"{rounded(value, decimals):.{decimals}f}"


def register_filters(engine: Any) -> None:
    """``engine_callback`` of the app's template config: the filters the templates use."""
    engine.engine.filters["rate"] = rate
