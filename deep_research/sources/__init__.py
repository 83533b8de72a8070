"""The built-in sources, one module each, found as a plugin's are (``app/sources.py``):
``kb`` (the knowledge base), ``openai_jobs`` (OpenAI research jobs) and ``search`` (search
and read pages, with any model or none). A new one is a module like these, named in an
entry point; nothing else changes."""
