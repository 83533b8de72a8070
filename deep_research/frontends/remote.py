"""The CLI as a client of a running service: ``--server URL`` (or DEEP_RESEARCH_SERVER_URL)
sends `run`, `resume` and `sessions …` through its HTTP API (``frontends.http``), with its
token (DEEP_RESEARCH_API_TOKEN). The run researches in the service, warm already; the
terminal follows its events and prints its report as a local run does.

Invariants:
- What the service refuses is refused here with its own one line and the exit code its
  error code means (``common.ERROR_CODES``); a service that cannot be reached is a
  ``ConfigError`` naming the URL (never the token).
- Ctrl-C stops following, never the run: it goes on in the service, and the line printed
  last says how to follow or cancel it.
- Events are followed with their ids: a connection that drops is opened again after the
  last event read (``Last-Event-ID``), so none is missed or shown twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, NoReturn

import httpx
import typer

from deep_research.core.errors import (
    EXIT_INTERRUPTED,
    EXIT_NO_FINDINGS,
    ConfigError,
    DeepResearchError,
    ProviderError,
    SessionError,
    UsageError,
)
from deep_research.core.events import TERMINAL, RunEvent
from deep_research.core.models import LedgerEntry, ResearchNode, SessionState, Usage
from deep_research.core.ports import JobEvent
from deep_research.frontends import render
from deep_research.frontends.common import ERROR_CODES, error_json, print_json

JOB_FIELDS = ("job_id", "model", "status", "polls", "elapsed_seconds", "note")
"""What a ``job`` event carries of its ``JobEvent`` (``core.events.RunObserver``)."""

RECONNECTS = 5
"""Times a dropped event stream is opened again before the error is said."""
STREAM = httpx.Timeout(60.0)
"""An event stream is pinged every 15 s (``frontends.http``): a minute of silence is a drop."""
CANCEL = httpx.Timeout(60.0, read=3700.0)
"""A team's cancel waits, at most DEEP_RESEARCH_WORKER_TIMEOUT_SECONDS (up to an hour), for
the worker that holds the run to let go of it."""


class Remote:
    """The service at ``url``: each method one request (``events``: a stream)."""

    def __init__(self, url: str, token: str | None, *, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def __enter__(self) -> Remote:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._http.close()

    def start(self, question: str, options: dict[str, Any]) -> str:
        """A new run's session id: it researches in the service from now on."""
        return self._session_id(
            self._call("POST", "/research", json={"question": question, **options})
        )

    def resume(self, session_id: str, request: dict[str, Any]) -> str:
        return self._session_id(self._call("POST", f"/research/{session_id}/resume", json=request))

    def status(self, session_id: str) -> dict[str, Any]:
        """``sessions show --json``'s object."""
        return dict(self._call("GET", f"/research/{session_id}"))

    def report(self, session_id: str) -> str:
        return str(self._request("GET", f"/research/{session_id}/report").text)

    def sessions(self, limit: int = 1000) -> list[dict[str, Any]]:
        return list(self._call("GET", "/sessions", params={"limit": limit}))

    def cancel(self, session_id: str) -> dict[str, Any]:
        return dict(self._call("POST", f"/research/{session_id}/cancel", json={}, timeout=CANCEL))

    def events(self, session_id: str, after: int | None = None) -> Iterator[RunEvent]:
        """The run's events as the service sends them, until its run ends (``end``) or the
        service ends the stream (no run of it is going on). A run that ends interrupted is
        followed on while the service says one will take it up (a team's worker stopped:
        the next resumes it, its ids going on)."""
        drops = 0
        while True:
            headers = {} if after is None else {"Last-Event-ID": str(after)}
            try:
                with self._http.stream(
                    "GET", f"/research/{session_id}/events", headers=headers, timeout=STREAM
                ) as reply:
                    if reply.status_code != 200:
                        reply.read()
                        self._check(reply)
                    interrupted = False
                    for event in _server_sent(reply.iter_lines()):
                        after, drops = event.id, 0
                        yield event
                        if event.type in TERMINAL:
                            interrupted = event.data.get("status") == "interrupted"
                            break
                    if not interrupted:
                        return  # it ended, or the service ended the stream: nothing runs it
            except httpx.TransportError as exc:
                drops += 1
                if drops > RECONNECTS:
                    raise self._unreachable(exc) from None
                time.sleep(min(2.0, 0.2 * 2**drops))

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        reply = self._request(method, path, **kwargs)
        try:
            return reply.json()
        except ValueError:
            raise self._not_ours(reply) from None

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            reply = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from None
        return self._check(reply)

    def _check(self, reply: httpx.Response) -> httpx.Response:
        """``reply``, unless it is a refusal (raised as ours) or a redirect."""
        if reply.is_redirect:  # a proxy's http -> https, say: followed, a POST is lost
            where = reply.headers.get("location", "elsewhere")
            raise ConfigError(f"the service at {self.url} (--server) moves to {where}: use that")
        if reply.status_code >= 400:
            raise _refused(reply)
        return reply

    def _session_id(self, reply: Any) -> str:
        session_id = reply.get("session_id") if isinstance(reply, dict) else None
        if not isinstance(session_id, str):
            raise ConfigError(f"{self.url} (--server) is not a deep-research service")
        return session_id

    def _not_ours(self, reply: httpx.Response) -> ConfigError:
        return ConfigError(
            f"{self.url} (--server) is not a deep-research service: {reply.request.method} "
            f"{reply.request.url.path} answered {reply.status_code} with no JSON"
        )

    def _unreachable(self, exc: httpx.TransportError) -> ConfigError:
        why = " ".join(str(exc).split()) or type(exc).__name__
        return ConfigError(f"cannot reach the service at {self.url} (--server): {why}")


def _refused(reply: httpx.Response) -> DeepResearchError:
    """The service's error as ours: its message, and the class its code stands for."""
    try:
        error = reply.json()["error"]
        code, message = str(error["code"]), " ".join(str(error["message"]).split())
    except (ValueError, KeyError, TypeError):
        code, message = "", f"HTTP {reply.status_code} {reply.reason_phrase}"
    if reply.status_code == 401:
        return ConfigError(f"the service refused the token (DEEP_RESEARCH_API_TOKEN): {message}")
    kind = next((k for k, c, _ in ERROR_CODES if c == code), DeepResearchError)
    if kind is SessionError and reply.status_code == 404 and not code:
        return SessionError(message)
    return kind(message)


def _server_sent(lines: Iterator[str]) -> Iterator[RunEvent]:
    """Server-Sent Events (the fields this service sends: ``id``, ``event``, ``data``; a
    comment line is its keep-alive ping) as the run's events."""
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield RunEvent.model_validate(json.loads("\n".join(data)))
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


# --- the CLI's commands through a service ------------------------------------------------


def connect(url: str, token: str | None) -> Remote:
    """The service at ``url`` (``common.service`` finds it)."""
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--server must be an http:// or https:// URL, not {url!r}")
    return Remote(url, token)


def follow_run(remote: Remote, session_id: str, *, as_json: bool) -> NoReturn:
    """Follow a run in the service until it ends, then print its report and spend as a
    local run does (``run_cli._drive``); the exit code a local run would have."""
    where = f"--server {remote.url}"
    if not as_json:
        render.info(f"session {session_id} runs at {remote.url}; Ctrl-C stops following it")
    replica = Replica.of(remote.status(session_id))  # what it has done already, resumed
    show_live = not as_json and render.err.is_terminal
    try:
        with render.live_view(replica.state, enabled=show_live) as view:
            progress = view.event if show_live else render.Progress()
            for event in remote.events(session_id):
                said = replica.apply(event)
                if said is not None and not as_json:
                    progress(said)
                elif show_live:
                    view.refresh()
    except KeyboardInterrupt:
        message = (
            f"stopped following; the run goes on at the service: `deep-research sessions "
            f"watch {session_id} {where}` follows it, `deep-research sessions cancel "
            f"{session_id} {where}` stops it."
        )
        render.info(message)
        if as_json:
            print_json(error_json("interrupted", message, EXIT_INTERRUPTED))
        raise typer.Exit(EXIT_INTERRUPTED) from None
    status = remote.status(session_id)
    found = any(node["status"] == "done" for node in status["nodes"])
    code = 0 if found else EXIT_NO_FINDINGS
    if status["status"] in ("interrupted", "failed"):  # as a local run's Ctrl-C, or error
        code = EXIT_INTERRUPTED if status["status"] == "interrupted" else ProviderError.exit_code
    if as_json:
        summary = {key: status[key] for key in ("session_id", "status", "stop_reason", "usage")}
        print_json(summary | {"report_path": status["report_path"], "exit_code": code})
        raise typer.Exit(code)
    if status["report_path"] is not None:
        render.report(remote.report(session_id))
        render.info(f"report: {status['report_path']} (at {remote.url})")
    usage = status["usage"]
    render.info(
        f"session {session_id}: {status['status']} ({status['stop_reason']}) · "
        f"${usage['cost_usd']:.4f} · {usage['total_tokens']:,} tokens"
    )
    if code == EXIT_INTERRUPTED:
        render.info(
            f"interrupted at the service. Resume with: deep-research resume {session_id} {where}"
        )
    raise typer.Exit(code)


class Replica:
    """A run in the service as its events tell it: as much of its session as the live view
    draws (its nodes, their times, the spend), for the same view as a local run's."""

    def __init__(self, session_id: str) -> None:
        self.state = SessionState(session_id=session_id, question="")

    @classmethod
    def of(cls, detail: dict[str, Any]) -> Replica:
        """Seeded from the run's status object (``sessions show --json``): a resumed run's
        nodes and spend are there before its events say anything of them."""
        replica = cls(detail["session_id"])
        state = replica.state
        state.question, state.iteration = detail["question"], detail["iteration"]
        start = state.created_at
        for n, node in enumerate(detail["nodes"]):  # in their order
            seeded = ResearchNode.model_validate(node)
            seeded.created_at = start + timedelta(microseconds=n)
            state.nodes[seeded.id] = seeded
        usage = Usage(output_tokens=int(detail["usage"]["total_tokens"]))
        cost = float(detail["usage"]["cost_usd"])
        state.ledger = [LedgerEntry(role="planner", model="", cost_usd=cost, usage=usage)]
        return replica

    def apply(self, event: RunEvent) -> str | JobEvent | None:
        """The session as ``event`` leaves it; what the view says of it (None: its table
        and totals show it). Spend is said at the end, a job's status when it changes."""
        state, data = self.state, event.data
        if event.type == "node" and event.node_id:
            node = state.nodes.get(event.node_id) or ResearchNode(
                id=event.node_id, question=str(data.get("question", "")), created_at=event.at
            )
            node.status = data.get("status", node.status)
            node.source_hint = data.get("source_hint", node.source_hint)
            node.error, node.cost_usd = data.get("error"), float(data.get("cost_usd", 0.0))
            node.iteration = int(data.get("iteration", node.iteration))
            if node.status == "running":
                node.started_at, node.finished_at = node.started_at or event.at, None
            elif node.started_at is not None:
                node.finished_at = node.finished_at or event.at
            state.nodes[node.id] = node
            state.iteration = max(state.iteration, node.iteration)
            return None
        if event.type == "spend":
            usage = Usage(output_tokens=int(data.get("tokens", 0)))
            cost = float(data.get("cost_usd", 0.0))
            state.ledger = [LedgerEntry(role="planner", model="", cost_usd=cost, usage=usage)]
            return None
        if event.type == "job":
            fields = {name: data[name] for name in JOB_FIELDS if name in data}
            return JobEvent(node_id=event.node_id or "", **fields)
        if event.type == "end":
            state.status = data.get("status", state.status)
        return event.message


def show(detail: dict[str, Any]) -> None:
    """``sessions show`` of a run in the service, from its HTTP status object."""
    usage = detail["usage"]
    stop = f" ({detail['stop_reason']})" if detail["stop_reason"] else ""
    for label, value in (
        ("question", detail["question"]),
        ("status", f"{detail['status']}{stop}"),
        ("spend", f"${usage['cost_usd']:.4f} · {usage['total_tokens']:,} tokens"),
        ("report", detail["report_path"] or "(not written yet)"),
        ("resume", detail["resume"]),
    ):
        if value:
            render.out.print(f"{label + ':':<10}{value}", markup=False, highlight=False)
    for node in detail["nodes"]:
        line = f"  {node['id']} [{node['status']}] {node['question']}"
        render.out.print(line, markup=False, highlight=False)
