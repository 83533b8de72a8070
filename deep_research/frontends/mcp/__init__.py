"""`deep-research mcp`: research, the knowledge base and claim checks as MCP tools (the
list, with what each does, is docs/mcp.md's table: ``test_mcp`` serves exactly those).

Built on the official SDK (``MCPServer``); every tool has typed input and output, so the SDK
publishes both schemas. research_start and research_resume take the fields of the HTTP API's
bodies (``options.ResearchRequest``, ``options.ResumeRequest``: ``takes``), so an MCP client
has every option the API and the CLI have, with the same bounds and descriptions. The
engine is reached only through the use-cases in ``app/``, and a server's runs through one
``RunManager``: what a client starts here is a session like any other, which the CLI can
watch, cancel and resume, and the other way round.

The package: ``server`` builds the server (``create_server``), its strictness about
arguments and its transports (stdio, streamable HTTP); ``context`` what the tools share
(the ``ToolContext``: settings, runs, page reader; one-line errors; ``takes``); ``views``
the tools' results; the tools by concern, each module's ``register(server, context)``
adding its own: ``research_tools``, ``kb_tools`` (kb_search, kb_fetch) and ``web_tools``
(verify_claim, and search and fetch for the connectors), listed once, in ``server.TOOLS``.

Invariants:
- stdio (the default): nothing but protocol messages reaches stdout. The SDK points fd 1 at
  stderr while it serves, and logs go to stderr.
- streamable HTTP (``--http PORT``) binds 127.0.0.1 and keeps the SDK's Host and Origin
  checks (DNS rebinding): this server's own address, and the host of
  ``DEEP_RESEARCH_KB_MCP_URL`` when a tunnel publishes it. When ``DEEP_RESEARCH_API_TOKEN``
  is set every request must carry it (``Authorization: Bearer …``, constant-time compare);
  a public URL without a token is refused.
- When the client goes away (stdin closed, SIGTERM, Ctrl-C, the HTTP server stopped) every
  run is saved as interrupted; ``resume`` picks it up.
- A tool that fails returns a tool error with our one-line message, never a traceback;
  arguments a tool does not take are such an error too (``StrictServer``).
- Starting is light: ``initialize`` and ``tools/list`` are answered before the engine
  (LangChain, OpenAI, Chroma, the page reader, the embedder) is imported; the first tool
  that needs it loads it (``tests/test_startup.py``).
- stderr gets warnings and errors only, whatever level a library sets on its logger.
"""
