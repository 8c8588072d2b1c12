"""Extraction of memories from raw events: pluggable extractors behind one interface (base.py),
a local rule-based one (rules.py) and one for OpenAI-compatible chat APIs (llm.py). A library:
no HTTP routes and no database sessions of its own; the facade part is service.py."""
