"""USD prices per million tokens. An unknown model is not an error: tokens count, cost is None."""

from __future__ import annotations

# (input, output) USD per 1M tokens, from the providers' public price pages.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o4-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o1": (15.00, 60.00),
    "o1-mini": (1.10, 4.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "offline": (0.0, 0.0),
}


def price_for(model: str) -> tuple[float, float] | None:
    """Exact id first, then the longest known prefix (``gpt-4o-2024-08-06`` → ``gpt-4o``)."""
    if model in PRICES:
        return PRICES[model]
    candidates = [name for name in PRICES if model.startswith(name + "-")]
    return PRICES[max(candidates, key=len)] if candidates else None


def cost_usd(model: str, tokens_in: int, tokens_out: int) -> float | None:
    price = price_for(model)
    if price is None:
        return None
    return round((tokens_in * price[0] + tokens_out * price[1]) / 1_000_000, 8)
