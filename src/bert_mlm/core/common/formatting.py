"""Numbers as the report and the model card write them (one rule for both)."""

from __future__ import annotations

import math


def format_value(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value)


def with_error(value, error=None) -> str:
    """``value ± standard error`` where there is a (finite) error."""
    if isinstance(error, float) and math.isfinite(error) and isinstance(value, float):
        return f"{value:.4f} ± {error:.4f}"
    return format_value(value)
