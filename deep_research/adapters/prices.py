"""Prices from the installed ``genai-prices`` data: the ``PriceBook`` port's adapter.

Invariants:
- Every figure is USD. Prices come from the installed ``genai-prices`` data (offline: its
  ``UpdatePrices`` fetches from the network and is never started), unless the user overrides a
  model (``DEEP_RESEARCH_PRICES``). Override prices are per 1M tokens; a web search is a flat fee.
- Where genai-prices has no price (it raises ``LookupError``), and only then, a model may
  have ours (``_ours``): dated, from OpenAI's pricing page, dropped once genai-prices has it.
- Prices follow the model's *name* wherever it is served: ``openai/gpt-5.5`` on a gateway
  bills like OpenAI's ``gpt-5.5``. Dated snapshots resolve through genai-prices itself (ours:
  the name without its date).
- ``Usage.cached_input_tokens`` (cache reads) and ``Usage.cache_write_tokens`` are parts of
  ``Usage.input_tokens``, clamped so that together they never exceed it, and
  ``Usage.reasoning_tokens`` is part of ``Usage.output_tokens`` (OpenAI's accounting), so
  nothing is billed twice and no part comes out negative. A cache write costs the model's
  own write price: genai-prices' (GPT-6: 1.25x input; models without one bill writes as
  input), or for an override ``CACHE_WRITE_SHARE`` x its input price.
- A call's service tier (the reply's ``service_tier``) selects genai-prices' rates for that
  tier; a price without rates for it (an override, ours, a record lacking the tier) scales
  its token cost by ``TIER_SHARES`` (flex: half). Web-search fees never change with the tier.
- A web search provider of the search-and-read engine is booked as the model
  ``search:<provider>`` (``search_model``): its ``web_search_calls`` at that provider's
  per-request fee (``search_fees``), and nothing else.
- A model we have no price for costs only its web-search fees here (a local Ollama/vLLM
  model), but its tokens still count against the token limit: callers meter tokens
  separately, and decide whether an unpriced model on OpenAI's own API is an error
  (``PriceTable.knows``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
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
DEFAULT_TIER = "default"
CACHE_WRITE_SHARE = 1.25
"""An override's cache-write price as a share of its input price (the override format
carries three figures): GPT-6's rule, OpenAI's pricing page, checked 2026-11-26."""
TIER_SHARES: Mapping[str, float] = {"flex": 0.5, "priority": 2.0}
"""Token cost on a service tier as a share of the standard rate, for a price without rates
of its own for that tier: flex (like Batch) 50 %, priority 2x (GPT-6); OpenAI's pricing
page, checked 2026-11-26. Any other tier ("default", "scale") bills the standard rate."""
LONG_CONTEXT_TOKENS = 272_000
"""GPT-5.5 and GPT-6 bill a request above this many input tokens at their long-context rate."""
_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def search_model(provider: str) -> str:
    """The ledger's name for searches of ``provider`` (``search:tavily``)."""
    return SEARCH_PREFIX + provider


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens. ``cache_write`` None: ``CACHE_WRITE_SHARE`` x ``input``."""

    input: float
    cached_input: float
    output: float
    cache_write: float | None = None

    @property
    def write(self) -> float:
        return self.input * CACHE_WRITE_SHARE if self.cache_write is None else self.cache_write


@functools.lru_cache(maxsize=1)
def _ours() -> dict[str, ModelPrice]:
    """Ours, checked 2026-11-26, OpenAI pricing page; dropped when genai-prices has it
    (``tests/test_cache_writes.py`` fails to say so). Consulted only for a model genai-prices
    does not know (``LookupError``).

    - gpt-6.2-astra (released 2026-11-17): $8 input, $0.40 cached, $40 output per 1M; cache
      writes 1.25x input ($10). Its long-context rate is *assumed* to be other GPT-6's (2x
      input, cache reads and writes, 1.5x output above 272k input tokens): not confirmed.
    - gpt-6.2-sol is left out: we found no published price, so it stays unpriced.
    """
    from genai_prices.types import ModelPrice, Tier, TieredPrices

    def tiered(base: str, long: str) -> TieredPrices:
        tier = Tier(start=LONG_CONTEXT_TOKENS, price=Decimal(long))
        return TieredPrices(base=Decimal(base), tiers=[tier])

    return {
        "gpt-6.2-astra": ModelPrice(
            input_mtok=tiered("8", "16"),
            cache_write_mtok=tiered("10", "20"),
            cache_read_mtok=tiered("0.40", "0.80"),
            output_mtok=tiered("40", "60"),
        ),
    }


@functools.lru_cache(maxsize=1024)
def _record(name: str) -> tuple[ModelPrice, Mapping[str, ModelPrice]] | None:
    """The rates of an already normalised ``name``, standard and by service tier where
    genai-prices has them: genai-prices', else ours, else None.

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
        ours = _ours().get(_DATED.sub("", name))
        return None if ours is None else (ours, {})
    now = datetime.now(UTC)
    names = {
        v.when["service_tier"]
        for v in calc.model.price_variants or ()
        if set(v.when) == {"service_tier"}
    }
    tiers = {t: calc.model.get_prices(now, {"service_tier": t}) for t in names}
    return calc.model_price, tiers


def _per_mtok(value: object) -> float | None:
    """A genai-prices per-1M price as a float: a plain ``Decimal`` or a tiered price's base."""
    from genai_prices.types import TieredPrices

    if isinstance(value, TieredPrices):
        return float(value.base)
    if isinstance(value, Decimal):
        return float(value)
    return None


def _billed(usage: Usage) -> Usage:
    """``usage`` with its cache parts clamped: writes first (the dearer reading of a reply
    whose parts exceed its input), then reads, never more than the input together."""
    write = min(max(usage.cache_write_tokens, 0), usage.input_tokens)
    read = min(max(usage.cached_input_tokens, 0), usage.input_tokens - write)
    return usage.model_copy(update={"cache_write_tokens": write, "cached_input_tokens": read})


class PriceTable:
    """What a call costs: the user's overrides first, then genai-prices' data, then ours."""

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
        """True when ``model`` has an override, genai-prices prices it, or we do."""
        if model.startswith(SEARCH_PREFIX):
            return model.removeprefix(SEARCH_PREFIX) in self.search_fees
        name = base_name(model)
        return name in self.overrides or _record(name) is not None

    def cost(self, model: str, usage: Usage, *, tier: str = DEFAULT_TIER) -> float:
        """USD for one call (or a sum of calls) of ``model`` with ``usage``, served on the
        service ``tier`` its reply named ("flex": half the token cost).

        genai-prices applies long-context tiers (gpt-5.5 above 272k input tokens: 2x input,
        1.5x output) to the usage as given, so a sum of calls is priced at the tier of the sum.
        """
        if model.startswith(SEARCH_PREFIX):
            fee = self.search_fees.get(model.removeprefix(SEARCH_PREFIX), 0.0)
            return usage.web_search_calls * fee
        name = base_name(model)
        billed = _billed(usage)
        fees = usage.web_search_calls * WEB_SEARCH_USD_PER_CALL
        override = self.overrides.get(name)
        if override is not None:
            return TIER_SHARES.get(tier, 1.0) * _override_usd(override, billed) + fees
        record = _record(name)
        if record is None:
            return fees
        standard, tiers = record
        rates = tiers.get(tier, standard)
        share = 1.0 if tier in tiers else TIER_SHARES.get(tier, 1.0)
        searches = _per_mtok(vars(rates).get("web_searches_kcount"))
        if searches is not None:
            # A few records (o3-pro, embeddings) carry no search price: a search still costs.
            fees = usage.web_search_calls * searches / 1000
        return share * _tokens_usd(rates, billed) + fees


def _override_usd(price: Price, billed: Usage) -> float:
    # reasoning_tokens are already inside output_tokens: not added again.
    read, write = billed.cached_input_tokens, billed.cache_write_tokens
    return (
        (billed.input_tokens - read - write) * price.input
        + read * price.cached_input
        + write * price.write
        + billed.output_tokens * price.output
    ) * _PER_TOKEN


def _tokens_usd(rates: ModelPrice, billed: Usage) -> float:
    """What the tokens cost at ``rates`` (genai-prices' arithmetic, long-context tiers
    included); web searches are priced apart."""
    import genai_prices

    calc = rates.calc_price(
        genai_prices.Usage(
            input_tokens=billed.input_tokens,
            cache_read_tokens=billed.cached_input_tokens,
            cache_write_tokens=billed.cache_write_tokens,
            output_tokens=billed.output_tokens,
        )
    )
    return float(calc["total_price"])
