"""`deep-research serve`: the research engine over HTTP, with live events (SSE).

``app`` builds the server from the pieces: ``guard`` (who may ask, and errors as JSON),
``research`` (runs, sessions and the knowledge base) and ``page`` (the page and the docs).

    POST /research                 {"question": …, options} -> 202 {"session_id": …}
                                   (``options.ResearchRequest``: what ``run`` takes)
    GET  /research/{id}            status: the object ``sessions show --json`` prints
    GET  /research/{id}/events     Server-Sent Events; reconnect with Last-Event-ID
    GET  /research/{id}/report     markdown, or HTML (citations clickable) when accepted
    POST /research/{id}/resume     {"max_cost_usd": …} -> 202 (``options.ResumeRequest``)
    POST /research/{id}/cancel     stop the run and its research jobs
    GET  /sessions                 past runs, newest first
    GET  /limits                   the server's caps on a run's cost, its default preset
    GET  /kb/search?q=…&k=8        the knowledge base's best chunks
    GET  /openapi.json             the API's OpenAPI description (no Swagger UI: it would load
                                   its script from a CDN, and this server loads nothing from
                                   elsewhere; /docs says so and links here)
    GET  /                         a page to start runs, watch them live and read reports

Every front-end goes through the use-cases in ``app/`` (and a server's runs through
``runs.RunManager``), so the CLI can watch, cancel and resume what this server started, and
the other way round.

This server spends the user's money, so (invariants):
- It binds 127.0.0.1 unless told otherwise, and any other address needs
  ``DEEP_RESEARCH_API_TOKEN``; when a token is set, every request must carry it
  (``Authorization: Bearer …``, compared in constant time), except for the page's own
  files and the API's description (``PUBLIC``): they hold no data, and the page is where
  the user types the token.
- ``Host`` must name this server (``hosts``: its bind address, the machine's names on a
  public bind, ``DEEP_RESEARCH_PUBLIC_HOSTS``) and an ``Origin``, when sent, must be this
  server's: a web page the user visits cannot start runs (CSRF) or reach it through DNS
  rebinding. No CORS headers are ever sent.
- A POST must be ``Content-Type: application/json`` and at most ``MAX_BODY_BYTES``.
- Session ids are validated before they touch the file system; no endpoint reads a path a
  client gives. Reports are rendered as HTML by markdown-it-py with raw HTML off (model and
  web text is untrusted), each ``[N]`` linked from the report's data (``report_html``), and
  served, like the page, under a content security policy. Errors are JSON
  ``{"error": {"code", "message"}}``: the same one line the CLI prints and a stable code,
  never a traceback.
- A client going away never stops a run; stopping the server saves every run as
  interrupted (resume picks them up).
- What a run needs (the engine's modules, the TLS context, prices, the embedding model) is
  built as the server starts, off the event loop (``runs.warm_up``); a start waits for it
  rather than building it again, and the page answers meanwhile.
"""
