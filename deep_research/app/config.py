"""Settings: every setting, read with pydantic-settings from the environment
(``DEEP_RESEARCH_<NAME>``, plus the standard ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``) or from
a `.env` file in the working directory (the environment wins), names matched case-insensitively
and JSON-decoded for the settings that are mappings (``loading``, which names a bad value's
variable and file). Per-run CLI flags override them with ``Settings.with_flags``. Secrets are
``SecretStr`` and are never written to sessions, logs or caches. The data directory alone is
found without this module (``home``): ``sessions list|show`` need nothing else, and start
faster without pydantic-settings and the asyncio it imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from deep_research.app.clients import client_settings
from deep_research.app.home import ENV_FILE, default_home
from deep_research.app.refusals import refused
from deep_research.app.setting_types import (
    Domains,
    Home,
    HostList,
    Location,
    ModelPrices,
    OptionalSecret,
    OptionalText,
    ParallelBranches,
    Preset,
    ReasoningEffort,
    SearchPrices,
    SearchProviderChoice,
    SearchRates,
    Since,
    WebEngineChoice,
    kb_name,
    model_name,
)
from deep_research.core import scope
from deep_research.core.bounds import MAX_COST_USD, CostUSD, Iterations, RuntimeSeconds, TokenBudget
from deep_research.core.errors import ConfigError
from deep_research.kb.settings import EmbeddingProvider, KBSettings

MIN_TOKEN_CHARS = 32
"""An API token shorter than this is refused: it guards the user's money."""
ENV_PREFIX = "DEEP_RESEARCH_"
ModelName = Annotated[str, AfterValidator(model_name)]
KbName = Annotated[str, AfterValidator(kb_name)]


class Settings(BaseSettings):
    """Every setting. ``Settings(_env_file=None, **values)``: without `.env` (tests);
    ``loading.load_settings`` also names a bad value's variable."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=ENV_FILE,
        env_file_encoding="utf-8",
        extra="ignore",
        validate_assignment=True,
        populate_by_name=True,
    )

    # --- the server; the models per role (checked 2026-11-23 against the pinned openai SDK's
    # model list and genai-prices 0.2.3: live, priced, no shutdown; docs/models-and-prices.md)
    openai_api_key: SecretStr | None = Field(default=None, validation_alias="OPENAI_API_KEY")
    """API key (never written anywhere)."""
    openai_base_url: OptionalText = Field(default=None, validation_alias="OPENAI_BASE_URL")
    """Any OpenAI-compatible server (Ollama, vLLM, llama.cpp, a gateway); unset: OpenAI's API."""
    planner_model: ModelName = "gpt-6-sol"
    """Plans and replans."""
    synthesizer_model: ModelName = "gpt-6-sol"
    """Writes the report: its outline, sections and lead."""
    judge_model: ModelName = "gpt-6-sol"
    """Judges the outline each iteration, and the claims the claim verifier is unsure of."""
    branch_model: ModelName = "gpt-6-luna"
    """Writes branch notes (knowledge base, and search-and-read queries and notes)."""
    summarizer_model: ModelName = "gpt-6-luna"
    """Folds the rolling summary; compresses web reports."""
    temperature: float = Field(default=0.2, ge=0.0, le=2.0)
    """Only for models that take one: reasoning models get none unless their effort is none."""
    planner_reasoning_effort: ReasoningEffort | None = "low"
    """The planner's effort, for models that take one (moved to the nearest the model takes)."""
    synthesizer_reasoning_effort: ReasoningEffort | None = "medium"
    """The synthesizer's effort: writing the report is worth more reasoning."""
    judge_reasoning_effort: ReasoningEffort | None = "low"
    """The judge's effort."""
    branch_reasoning_effort: ReasoningEffort | None = "low"
    """The branch model's effort."""
    summarizer_reasoning_effort: ReasoningEffort | None = "low"
    """The summarizer's effort."""

    # --- guardrails -----------------------------------------------------------
    preset: Preset = "standard"
    """quick, standard or deep: the defaults of the settings that shape how far a run goes
    (``app/presets.py``); a setting given explicitly wins. Applied as a run is prepared."""
    max_depth: int = Field(default=3, ge=1, le=10)
    """Deepest sub-question level."""
    max_iterations: Iterations = 3
    """Plan -> research -> judge rounds (a preset sets it)."""
    max_parallel: ParallelBranches = 4
    """Branches in flight at once (a preset sets it; --max-parallel)."""
    max_tokens_per_call: int = Field(default=16_000, ge=256, le=200_000)
    """Ceiling of any chat call's reply, reasoning included; a plan, verdict or key points is
    capped nearer its size."""
    max_total_tokens: TokenBudget = 5_000_000
    """Token budget of a session; a web job reserves its worst case (1.22M tokens at the
    defaults) while it runs, so 4 fit in parallel."""
    max_runtime_seconds: RuntimeSeconds = 3600.0
    """Time budget of one run (or resume)."""
    max_cost_usd: CostUSD = 20.0
    """Cost budget of a session, in USD."""
    summary_max_tokens: int = Field(default=2000, ge=200, le=50_000)
    """R: the cap of the rolling summary (a preset sets it)."""
    max_nodes_per_plan: int = Field(default=8, ge=1, le=50)
    """Sub-questions one plan may add (a preset sets it)."""
    structured_output_retries: int = Field(default=2, ge=0, le=10)
    """Repairs of a structured reply that does not parse (each sends the reply back with
    what was wrong; the same request is never sent a third time)."""
    request_timeout_seconds: float = Field(default=120.0, gt=0)
    """Per HTTP request (a model lookup's: 10 s); a chat call that times out is sent once more."""
    max_concurrent_calls: int | None = Field(default=None, ge=1, le=1000)
    """Chat calls in flight at once on the server. Unset: what llama-server says it serves
    (its slots, ``/props``), else no limit."""
    context_tokens: int | None = Field(default=None, ge=512, le=10_000_000)
    """The chat model's context window. Unset: what llama-server says (``/props``), else
    unknown (a prompt too long for the model is then the server's to refuse)."""

    # --- the report: an outline, its sections, the lead (``core/writing.py``) ---
    report_max_sections: int = Field(default=8, ge=1, le=30)
    """Most sections of the report (a preset sets it)."""
    report_section_words: int = Field(default=900, ge=100, le=5000)
    """Most words of a section (a preset sets it)."""
    section_max_tokens: int = Field(default=4000, ge=500, le=100_000)
    """Reply cap of each writing call, reasoning included (the final reserve counts it)."""
    write_allowance_seconds: float = Field(default=180.0, ge=0, le=86_400)
    """Research starts nothing once less than this is left of the run (at most a quarter)."""
    max_retries: int = Field(default=4, ge=0, le=20)
    """HTTP retries of embeddings and polls (never of a job's create; a model lookup's: 1); for
    chat calls, the waits on a 429 that says when to come back (a timeout or a 5xx is retried
    once)."""

    # --- web research jobs (OpenAI deep research: a reasoning model + web_search, background) --
    web_model: ModelName = "gpt-5.5"
    """Runs the web research jobs."""
    web_effort: ReasoningEffort = "high"
    """The web model's effort (xhigh for harder questions, at a higher cost; a preset sets it)."""
    web_reasoning_summary: Literal["off", "auto", "concise", "detailed"] = "off"
    """A research job's reasoning summary (needs a verified organisation)."""
    web_max_tool_calls: int = Field(16, ge=1, le=500)
    """Searches and page reads per job: bounds its cost and time (a preset sets it)."""
    web_max_output_tokens: int = Field(default=32_000, ge=1000, le=272_000)
    """Output per job, reasoning included."""
    web_max_wait_seconds: float = Field(3600.0, gt=0)
    """Maximum wait for one job (then it is cancelled)."""
    web_poll_seconds: float = Field(default=5.0, gt=0)
    """First poll interval (it backs off x1.5 to 60 s)."""

    # --- web research by search and read (any model, or none) --------------------
    web_engine: WebEngineChoice = "auto"
    """openai: research jobs; search: search-and-read with the branch model; auto: openai
    where the server serves the web model, search elsewhere (docs/web-research.md); or a
    plugin's web source (docs/contributing.md)."""
    search_provider: SearchProviderChoice = "duckduckgo"
    """The search provider of search and read."""
    searxng_url: OptionalText = None
    """Your SearXNG server (its JSON API: json in its search.formats)."""
    tavily_api_key: SecretStr | None = Field(default=None, validation_alias="TAVILY_API_KEY")
    """Tavily's key (never written anywhere)."""
    brave_api_key: SecretStr | None = Field(default=None, validation_alias="BRAVE_API_KEY")
    """Brave's key (never written anywhere)."""
    exa_api_key: SecretStr | None = Field(default=None, validation_alias="EXA_API_KEY")
    """Exa's key (never written anywhere)."""
    search_prices: SearchPrices = Field(default_factory=dict)
    """USD per search request by provider, over the list prices, e.g. '{"tavily": 0.005}'."""
    search_rate_per_second: SearchRates = Field(default_factory=dict)
    """Searches a second by provider, over the defaults (duckduckgo 1, searxng 2, tavily 1.5,
    brave 1, exa 5), e.g. '{"brave": 20}'."""
    search_max_queries: int = Field(default=3, ge=1, le=10)
    """Queries per round of a branch."""
    search_results_per_query: int = Field(default=5, ge=1, le=10)
    """Results asked per query."""
    search_pages_per_round: int = Field(default=4, ge=1, le=20)
    """Pages read per round."""
    search_passages: int = Field(default=8, ge=1, le=50)
    """Ranked passages the notes are written from."""
    search_extra_rounds: int = Field(default=1, ge=0, le=5)
    """More rounds when the evidence is thin."""
    search_timeout_seconds: float = Field(default=15.0, gt=0, le=300)
    """One search request."""
    fetch_allow: HostList = ""
    """host[:port] list (comma-separated) the address check lets through: an intranet."""
    fetch_per_host_concurrency: int = Field(default=2, ge=1, le=32)
    """Page requests in flight per host."""
    fetch_per_host_rate: float = Field(default=2.0, gt=0, le=100)
    """Page requests a second per host."""
    fetch_timeout_seconds: float = Field(default=30.0, gt=0, le=600)
    """One page, request to last byte."""
    fetch_max_bytes: int = Field(default=2_000_000, ge=10_000, le=100_000_000)
    """Larger pages are skipped."""
    check_fetch: bool = True
    """The claim check reads the pages research jobs cited (off: their claims are only
    compared with what the job wrote next to the citation)."""

    # --- the web scope (``core/scope.py``): every web engine, the page reader, the claim check --
    domains: Domains = ""
    """Comma-separated domains the web is read from (subdomains included); "": any."""
    exclude_domains: Domains = ""
    """Comma-separated domains never read nor cited."""
    since: Since = ""
    """Pages published on or after: a date (2025-01-01) or a window back from the day a run
    starts (90d, 12w, 6m, 2y), saved as the date it resolved to."""
    location: Location = ""
    """Where the user is, 'City, Region, CC' (parts optional): "" sends no place."""
    web_tier: Literal["default", "flex"] = "default"
    """The service tier of research jobs: flex costs half and may queue longer (unverified
    with background web_search; docs/models-and-prices.md)."""

    # --- prices and spending ----------------------------------------------------
    prices: ModelPrices = Field(default_factory=dict)
    """USD per 1M tokens (input, cached input, output) by model: adds or overrides
    genai-prices, e.g. DEEP_RESEARCH_PRICES='{"my-model": [1.0, 0.1, 4.0]}'."""
    allow_unpriced: bool = False
    """Let a model with no known price run on OpenAI's own API (it then counts as $0)."""
    confirm_above_usd: float = Field(default=10.0, ge=0, le=MAX_COST_USD, allow_inf_nan=False)
    """On a terminal, ask before a run whose likely spend exceeds this (--yes or --max-cost
    skips the question)."""
    check_models: bool = True
    """Look each configured model up on the server before spending anything."""

    # --- servers (deep-research serve / mcp): they spend the user's money unattended ----
    server_max_runs: int = Field(default=2, ge=1, le=64)
    """Runs researching at once in a server process; more wait their turn."""
    server_max_cost_usd: CostUSD = 5.0
    """The most one run started through a server may cost."""
    server_daily_budget_usd: CostUSD = 50.0
    """What one UTC day may commit: every session's spend that day (CLI runs included),
    verify_claim's judge calls, and the cost limits serve and mcp reserved for runs they
    admitted; a run that does not fit is refused."""
    api_token: OptionalSecret = None
    """Bearer token the HTTP API and MCP server ask of every request; required off loopback.
    At least ``MIN_TOKEN_CHARS`` characters: it guards the user's money."""
    public_hosts: HostList = ""
    """More ``host[:port]`` names the HTTP API answers to, comma-separated (a reverse proxy's
    name); a public bind already answers to the machine's own names and addresses."""
    server_url: OptionalText = Field(default=None, pattern=r"^https?://\S+$")
    """A running service (`deep-research serve`) that runs, resumes and sessions go to."""
    kb_mcp_url: OptionalText = Field(default=None, pattern=r"^https?://\S+$")
    """The public URL of this tool's MCP server (``deep-research mcp --http``): web research
    jobs then search the knowledge base through it too."""

    # --- storage and the knowledge base -----------------------------------------
    home: Home = Field(default_factory=default_home)
    """Sessions, cache and knowledge-base store (blank: the default directory)."""
    database_url: OptionalSecret = None
    """A PostgreSQL URL: sessions live there, shared by a team (the ``team`` extra; ``db
    upgrade`` first). Unset: files under the data directory."""
    worker_concurrency: int = Field(default=2, ge=1, le=64)
    """Runs one `deep-research worker` researches at once."""
    worker_timeout_seconds: float = Field(default=60.0, ge=1, le=3600)
    """A worker silent this long is dead: another resumes its runs (its leases lapse too)."""
    team_max_research_jobs: int | None = Field(default=None, ge=1, le=1000)
    """Research jobs in flight at once across a team's machines (unset: no team-wide cap)."""
    kb_name: KbName = "default"
    """The knowledge base runs and kb commands use (a run with no model reads 'sample' until
    this one exists)."""
    kb_path: Path = Path("kb")
    """The shipped sample docs, ingested as KB 'sample' by a run with no model nor KB."""
    embedding_provider: EmbeddingProvider = "local"
    """local (shipped MiniLM, ONNX), local-fast (model2vec) or openai."""
    openai_embedding_model: ModelName = "text-embedding-3-small"
    """The embedding model of openai."""
    chroma_host: str | None = None
    """A Chroma server to use instead of the embedded store."""
    chroma_port: int = Field(default=8000, ge=1, le=65535)
    """The Chroma server's port."""
    chunk_tokens: int = Field(default=400, ge=32, le=8000)
    """Chunk size cap, counted with the embedding model's tokenizer and capped by its window
    (254 tokens for the default model)."""
    chunk_overlap_tokens: int = Field(default=40, ge=0, le=2000)
    """Overlap between chunks of one section."""
    max_file_bytes: int = Field(default=5_000_000, ge=1)
    """Larger files are skipped."""
    retrieval_k: int = Field(default=8, ge=1, le=100)
    """Passages per knowledge-base branch."""

    @property
    def on_openai(self) -> bool:
        """True when requests go to OpenAI's own API (no base URL, or api.openai.com)."""
        return not self.openai_base_url or "://api.openai.com" in self.openai_base_url

    @property
    def has_model(self) -> bool:
        """True when some model endpoint is configured (a non-empty key, a base URL, or both)."""
        return bool(self.openai_base_url or self.openai_api_key)  # SecretStr("") is falsy

    def web_scope(self, today: date | None = None) -> scope.WebScope:
        """The run's web scope, ``since`` resolved against ``today`` (the run's start)."""
        since = scope.parse_since(self.since, today or date.today()) if self.since else None
        return scope.WebScope(
            domains=scope.domains(self.domains),
            exclude_domains=scope.domains(self.exclude_domains),
            since=since,
            location=self.location,
        )

    @property
    def fetch_allow_list(self) -> tuple[str, ...]:
        return tuple(filter(None, (e.strip() for e in self.fetch_allow.split(","))))

    @property
    def public_host_list(self) -> tuple[str, ...]:
        return tuple(filter(None, (e.strip().lower() for e in self.public_hosts.split(","))))

    @property
    def sessions_dir(self) -> Path:
        return self.home / "sessions"

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"

    @property
    def kb_dir(self) -> Path:
        return self.home / "kb"

    @property
    def kb(self) -> KBSettings:
        """What the knowledge base reads of these settings: the fields of the same names."""
        same = self.model_dump(include={field.name for field in fields(KBSettings)})
        client = client_settings(self, "embed") if self.has_model else None
        return KBSettings(kb_dir=self.kb_dir, embeddings_client=client, **same)

    def token(self) -> str | None:
        """The API token, checked where it guards something (``serve``, ``mcp --http``, a
        published KB), not on every command: an old short token in `.env` must not lock
        the user out of ``sessions list``. None when there is none."""
        if self.api_token is None:
            return None
        value = self.api_token.get_secret_value()
        if len(value) < MIN_TOKEN_CHARS:
            raise ConfigError(
                f"invalid DEEP_RESEARCH_API_TOKEN: must be at least {MIN_TOKEN_CHARS} "
                "characters (it guards your money); make one with: "
                'python -c "import secrets; print(secrets.token_urlsafe(32))"'
            )
        return value

    def with_overrides(self, **values: Any) -> Settings:
        """A copy with per-run values applied (None means "not given"), validated."""
        return self.with_flags({}, values)

    def with_flags(self, flags: Mapping[str, str], values: Mapping[str, Any]) -> Settings:
        """``with_overrides``, where ``flags`` names the command-line flag that gave a setting
        its value: a bad one is then a usage error naming the flag (exit 2), not the setting."""
        given = {k: v for k, v in values.items() if v is not None}
        if not given:
            return self
        copy = self.model_copy()
        for name, value in given.items():
            if name not in type(self).model_fields:
                raise ValueError(f"unknown setting {name!r}")
            try:
                # Validated on assignment; not re-reading the environment and .env (~10 ms).
                setattr(copy, name, value)
            except ValidationError as exc:
                raise refused(exc, flags.get(name), value, secret=name in SECRETS) from None
        return copy


SECRETS = frozenset(
    name for name, field in Settings.model_fields.items() if SecretStr in get_args(field.annotation)
)
