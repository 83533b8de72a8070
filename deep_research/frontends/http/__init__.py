"""`deep-research serve`: the research engine over HTTP, with live events (SSE).

``app`` builds the server from the pieces: ``guard`` (who may ask, and errors as JSON),
``research`` (runs, sessions and the knowledge base) and ``page`` (the page and the docs).
Every front-end goes through the use-cases in ``app/`` (and a server's runs through
``runs.RunManager``), so the CLI can watch, cancel and resume what this server started, and
the other way round.

The endpoints, and the invariants of a server that spends the user's money (loopback unless
a token is set, Host and Origin checked, JSON bodies of bounded size, session ids validated,
reports rendered without raw HTML under a content security policy, one-line JSON errors,
every run saved as interrupted when the server stops): docs/http-api.md.
"""
