"""Errors of the model package that torch-free code catches: importing this module needs no torch."""


class CheckpointError(ValueError):
    """A checkpoint that is missing, unreadable, or does not match its config."""
