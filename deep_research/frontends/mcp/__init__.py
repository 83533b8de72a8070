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

Its invariants (nothing but protocol messages on stdout under stdio; loopback, Host and
Origin checks and the token under streamable HTTP; every run saved as interrupted when the
client goes away; one-line tool errors, unknown arguments refused; a light start that loads
the engine on the first tool call; warnings and errors only on stderr): docs/mcp.md.
"""
