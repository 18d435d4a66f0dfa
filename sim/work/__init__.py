"""Torch-free plumbing for bounded, fair work: thread counts, the server-wide queue, run-cost estimates."""
