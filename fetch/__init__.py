"""Fetch: the stage that claims ready pages, fetches them politely (or renders them) and records each result."""
