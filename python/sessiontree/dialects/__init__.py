"""The dialects sessiontree reads and writes besides its own (FORMAT.md): pi's.

``import sessiontree.dialects.pi`` for pi's role names, its LLM conversion and file
conversion; reading and continuing pi files needs nothing but ``JsonlSessionStorage``.
"""
