"""Prices from the installed ``genai-prices`` data: the ``PriceBook`` port's adapter.

Invariants:
- Every figure is USD. Prices come from the installed ``genai-prices`` data (offline: its
  ``UpdatePrices`` fetches from the network and is never started), unless the user overrides a
  model (``DEEP_RESEARCH_PRICES``). Override prices are per 1M tokens; a web search is a flat fee.
- Prices follow the model's *name* wherever it is served: ``openai/gpt-5.5`` on a gateway
  bills like OpenAI's ``gpt-5.5``. Dated snapshots resolve through genai-prices itself.
- ``Usage.cached_input_tokens`` is a subset of ``Usage.input_tokens`` and
  ``Usage.reasoning_tokens`` a subset of ``Usage.output_tokens`` (OpenAI's
  accounting), so neither is billed twice.
- A web search provider of the search-and-read engine is booked as the model
  ``search:<provider>`` (``search_model``): its ``web_search_calls`` at that provider's
  per-request fee (``search_fees``), and nothing else.
- A model we have no price for costs only its web-search fees here (a local Ollama/vLLM
  model), but its tokens still count against the token limit: callers meter tokens
  separately, and decide whether an unpriced model on OpenAI's own API is an error
  (``PriceTable.unpriced``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from deep_research.adapters.llm.params import base_name
from deep_research.core.models import Usage

if TYPE_CHECKING:
    from genai_prices.types import ModelPrice

_PER_TOKEN = 1 / 1_000_000
PROVIDER_ID = "openai"
WEB_SEARCH_USD_PER_CALL = 0.01  # $10 per 1,000 searches
SEARCH_PREFIX = "search:"


def search_model(provider: str) -> str:
    """The ledger's name for searches of ``provider`` (``search:tavily``)."""
    return SEARCH_PREFIX + provider


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens."""

    input: float
    cached_input: float
    output: float


@functools.lru_cache(maxsize=1024)
def _model_price(name: str) -> ModelPrice | None:
    """genai-prices' price record for an already normalised ``name``, None when unknown.

    Cached (hits and misses) so the hot path never re-searches genai-prices' model list;
    imported here, not at module level, because loading its data takes ~0.2 s and most CLI
    commands price nothing.
    """
    import genai_prices

    try:
        calc = genai_prices.calc_price(
            genai_prices.Usage(), model_ref=name, provider_id=PROVIDER_ID
        )
    except LookupError:
        return None
    return calc.model_price


def _per_mtok(value: object) -> float | None:
    """A genai-prices per-1M price as a float: a plain ``Decimal`` or a tiered price's base."""
    from genai_prices.types import TieredPrices

    if isinstance(value, TieredPrices):
        return float(value.base)
    if isinstance(value, Decimal):
        return float(value)
    return None


class PriceTable:
    """What a call costs: the user's overrides first, then genai-prices' data."""

    def __init__(
        self,
        overrides: Mapping[str, Price] | None = None,
        search_fees: Mapping[str, float] | None = None,
    ) -> None:
        self.search_fees = dict(search_fees or {})
        """USD per request by search provider name."""
        self.overrides: dict[str, Price] = {
            base_name(model): price for model, price in (overrides or {}).items()
        }

    def knows(self, model: str) -> bool:
        """True when ``model`` has an override or genai-prices prices it."""
        if model.startswith(SEARCH_PREFIX):
            return model.removeprefix(SEARCH_PREFIX) in self.search_fees
        name = base_name(model)
        return name in self.overrides or _model_price(name) is not None

    def unpriced(self, models: Iterable[str]) -> list[str]:
        """The models among ``models`` this book cannot price, each once, in order."""
        return [m for m in dict.fromkeys(models) if not self.knows(m)]

    def price(self, model: str) -> Price | None:
        """Base per-1M prices of ``model`` (below any long-context tier); None when unknown."""
        name = base_name(model)
        if name in self.overrides:
            return self.overrides[name]
        record = _model_price(name)
        if record is None:
            return None
        fields = vars(record)
        input_usd = _per_mtok(fields.get("input_mtok")) or 0.0
        cached = _per_mtok(fields.get("cache_read_mtok"))
        return Price(
            input=input_usd,
            cached_input=input_usd if cached is None else cached,
            output=_per_mtok(fields.get("output_mtok")) or 0.0,
        )

    def cost(self, model: str, usage: Usage) -> float:
        """USD for one call (or a sum of calls) of ``model`` with ``usage``.

        genai-prices applies long-context tiers (gpt-5.5 above 272k input tokens: 2x input,
        1.5x output) to the usage as given, so a sum of calls is priced at the tier of the sum.
        """
        if model.startswith(SEARCH_PREFIX):
            fee = self.search_fees.get(model.removeprefix(SEARCH_PREFIX), 0.0)
            return usage.web_search_calls * fee
        name = base_name(model)
        # Clamp: a provider reporting more cached than total input must not yield a
        # negative uncached count (and so a discount).
        cached = min(max(usage.cached_input_tokens, 0), usage.input_tokens)
        fees = usage.web_search_calls * WEB_SEARCH_USD_PER_CALL
        override = self.overrides.get(name)
        if override is not None:
            # reasoning_tokens are already inside output_tokens: not added again.
            tokens_usd = (
                (usage.input_tokens - cached) * override.input
                + cached * override.cached_input
                + usage.output_tokens * override.output
            ) * _PER_TOKEN
            return tokens_usd + fees
        record = _model_price(name)
        if record is None:
            return fees
        import genai_prices

        bills_searches = vars(record).get("web_searches_kcount") is not None
        calc = genai_prices.calc_price(
            genai_prices.Usage(
                input_tokens=usage.input_tokens,
                cache_read_tokens=cached,
                output_tokens=usage.output_tokens,
                web_searches=usage.web_search_calls,
            ),
            model_ref=name,
            provider_id=PROVIDER_ID,
        )
        # A few records (o3-pro, embeddings) carry no search price: a search still costs.
        return float(calc.total_price) + (0.0 if bills_searches else fees)
