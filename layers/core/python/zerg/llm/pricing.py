"""USD prices per million tokens. An unknown model is not an error: tokens count, cost is None.

A model is looked up by its id with or without its provider (``anthropic:claude-haiku-4-5`` and
``claude-haiku-4-5`` alike), a Bedrock id with or without its geographic inference profile
(``us.amazon.nova-pro-v1:0``), a dated id by its family (``gpt-4o-2024-08-06`` → ``gpt-4o``). Every
default model of every provider (:data:`zerg.llm.providers.DEFAULT_MODELS`) has a price here
(tests/test_providers.py checks it), so a budgeted run on the defaults is never refused for an
unknown price.
"""

from __future__ import annotations

# (input, output) USD per 1M tokens, from the providers' public price pages (on-demand, standard tier).
PRICES: dict[str, tuple[float, float]] = {
    # OpenAI (Chat Completions and Responses alike)
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
    # Anthropic (the Messages API). Explicit entries for each Opus 4.5+ (a cheaper tier than Opus 4 / 4.1,
    # which the prefix rule would otherwise apply to them).
    "claude-opus-4-8": (5.00, 25.00),
    "claude-opus-4-7": (5.00, 25.00),
    "claude-opus-4-6": (5.00, 25.00),
    "claude-opus-4-5": (5.00, 25.00),
    "claude-opus-4-1": (15.00, 75.00),
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4-6": (3.00, 15.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-3-5-haiku": (0.80, 4.00),
    # Amazon Bedrock (us-east-1 on-demand; a geographic profile such as us. costs the same)
    "amazon.nova-premier-v1:0": (2.50, 12.50),
    "amazon.nova-pro-v1:0": (0.80, 3.20),
    "amazon.nova-lite-v1:0": (0.06, 0.24),
    "amazon.nova-micro-v1:0": (0.035, 0.14),
    "anthropic.claude-opus-4-5-20251101-v1:0": (5.00, 25.00),
    "anthropic.claude-sonnet-4-5-20250929-v1:0": (3.00, 15.00),
    "anthropic.claude-sonnet-4-20250514-v1:0": (3.00, 15.00),
    "anthropic.claude-3-7-sonnet-20250219-v1:0": (3.00, 15.00),
    "anthropic.claude-haiku-4-5-20251001-v1:0": (1.00, 5.00),
    "anthropic.claude-3-5-haiku-20241022-v1:0": (0.80, 4.00),
    "amazon.titan-embed-text-v2:0": (0.02, 0.0),
    "offline": (0.0, 0.0),
}

# Prompt-cache rates as multiples of the input price: (read, write). Families not listed here are
# priced at the input price (OpenAI's ledger figures stay what they were).
CACHE_RATES: dict[str, tuple[float, float]] = {
    "claude-": (0.10, 1.25),
    "anthropic.claude-": (0.10, 1.25),
    "amazon.nova-": (0.25, 1.0),
}
PROVIDERS = ("openai", "openai-chat", "anthropic", "bedrock", "offline")
GEO_PREFIXES = ("us.", "eu.", "apac.", "jp.", "au.", "ca.", "us-gov.", "global.")


def bare(model: str) -> str:
    """``model`` without its provider and without a Bedrock geographic profile."""
    provider, sep, rest = model.partition(":")
    if sep and provider in PROVIDERS:
        model = rest
    for geo in GEO_PREFIXES:
        if model.startswith(geo):
            return model[len(geo):]
    return model


def price_for(model: str) -> tuple[float, float] | None:
    """Exact id first, then the longest known prefix (``gpt-4o-2024-08-06`` → ``gpt-4o``)."""
    model = bare(model)
    if model in PRICES:
        return PRICES[model]
    candidates = [name for name in PRICES if model.startswith(name + "-")]
    return PRICES[max(candidates, key=len)] if candidates else None


def cost_usd(model: str, tokens_in: int, tokens_out: int, *, cached: int = 0, cache_write: int = 0) -> float | None:
    """The cost of one call; ``cached`` and ``cache_write`` (parts of ``tokens_in``) at their cache
    rates where the provider prices them apart."""
    price = price_for(model)
    if price is None:
        return None
    name = bare(model)
    read_rate, write_rate = next((r for family, r in CACHE_RATES.items() if name.startswith(family)), (1.0, 1.0))
    plain = max(0, tokens_in - cached - cache_write)
    usd_in = price[0] * (plain + cached * read_rate + cache_write * write_rate)
    return round((usd_in + tokens_out * price[1]) / 1_000_000, 8)
