"""Each run option's flag and the one text that explains it: plain data, so that the CLI's
``--help`` reads it without loading pydantic, and the option models (``options.py``: the
HTTP API's bodies, the MCP tools' arguments) describe their fields in the same words. An
option is named the same everywhere: its field here, in ``options``, and the CLI's
parameter; the setting it overrides is in ``options`` (``Sets``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Flag:
    flag: str
    """The CLI's flag (its first name)."""
    help: str


_DEFAULT = "(default: as configured)"

FLAGS: dict[str, Flag] = {
    "max_cost_usd": Flag(
        "--max-cost",
        "Cost limit in USD for the whole session (default: as configured; a server caps "
        "what a run may spend, DEEP_RESEARCH_SERVER_MAX_COST_USD).",
    ),
    "max_iterations": Flag("--max-iterations", f"Plan -> research -> judge rounds {_DEFAULT}."),
    "max_total_tokens": Flag("--max-tokens", f"Total token limit {_DEFAULT}."),
    "max_runtime_seconds": Flag("--max-runtime", f"Time limit in seconds {_DEFAULT}."),
    "max_parallel": Flag("--max-parallel", f"Branches researched at once {_DEFAULT}."),
    "preset": Flag(
        "--preset",
        "quick, standard or deep: the defaults of the run's iterations, sub-questions per "
        "plan, parallel branches, web job effort and tool calls, and summary size; any of "
        "them given explicitly wins (default: DEEP_RESEARCH_PRESET, else standard).",
    ),
    "chat_model": Flag(
        "--chat-model", "One model for every chat role (planner, branch, …); a role's wins."
    ),
    "planner_model": Flag("--planner-model", "Model for planning."),
    "branch_model": Flag(
        "--branch-model", "Model for branch notes (knowledge base and search-and-read)."
    ),
    "web_model": Flag(
        "--web-model",
        "Reasoning model that runs web research jobs (default: DEEP_RESEARCH_WEB_MODEL, "
        "else gpt-5.5).",
    ),
    "web_effort": Flag(
        "--web-effort",
        "The web model's reasoning effort: none, minimal, low, medium, high, xhigh, max (the "
        "nearest the model takes).",
    ),
    "web_tier": Flag(
        "--web-tier",
        "The research jobs' service tier: default, or flex (half the price, may wait longer; "
        "unverified with background web search; a refusal stops the run).",
    ),
    "web_engine": Flag(
        "--web-engine",
        "How the web is researched: openai (research jobs), search (search and read pages "
        "with any model, or none), a plugin's web source by name, or auto (openai where the "
        "server serves the web model, else search).",
    ),
    "search_provider": Flag(
        "--search-provider",
        "The search provider of --web-engine search: duckduckgo (the default), searxng, "
        "tavily, brave, exa, or a plugin's.",
    ),
    "domains": Flag("--domains", "Only these domains (comma-separated; subdomains included)."),
    "exclude_domains": Flag("--exclude-domains", "Never these domains."),
    "since": Flag(
        "--since",
        "Pages published on or after: 2025-01-01, or 90d / 12w / 6m / 2y back from today.",
    ),
    "location": Flag(
        "--location",
        "Where you are, 'City, CC' (default: no place is sent; OpenAI would assume the "
        "United States).",
    ),
    "kb_name": Flag("--kb", "The knowledge base to research."),
    "kb_only": Flag("--kb-only", "Research only the knowledge base."),
    "web_only": Flag("--web-only", "Research only the web."),
    "retry_cancelled": Flag("--retry-cancelled", "Research the cancelled sub-questions again too."),
    "resubmit_lost": Flag(
        "--resubmit-lost",
        "Submit again the research jobs whose create was sent but whose id was lost (the "
        "process died first): the first may be running and billing too.",
    ),
}
