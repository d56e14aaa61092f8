"""The shared leaf: pieces every screen and service may use (query strings, keyset paging, htmx typing).

It imports no app of this project (checked by import-linter, `pyproject.toml`).
"""
