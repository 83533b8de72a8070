"""The no-model mode: deterministic stand-ins for every model the orchestrator talks to.

``text`` holds the pure text tools; ``roles`` the planner, branch writer, summarizer, report author
and judge; ``app.wiring`` assembles them into an engine."""
