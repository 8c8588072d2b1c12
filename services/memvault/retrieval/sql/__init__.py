"""The SQL of a search, one module per stage of its statement.

``candidates`` (each channel's best rows: ``dense``, ``words`` for BM25, full text otherwise),
fused by id, widened by ``context`` (the session neighbours of the best), given their
``signals`` (recency, importance, access, strength, intent, graph, time), ranked per channel in
``ranks``, fused into one score in ``fusion``; ``statement`` assembles them once per ``shape``.
``preamble`` and ``neighbours`` are the small statements before and after it; ``terms`` (word
counts) and ``chains`` (a reader's chain size) the counts the word channel is chosen by, cached by
retrieval/lexical.py and retrieval/chain.py.

Signals only rank the candidates that retrieval found: they reorder, they never add or remove a
result (the context channel's neighbours are candidates too).
"""
