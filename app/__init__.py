"""Shared UI: cached resources, URL state, figure builders. Pages import from here."""
