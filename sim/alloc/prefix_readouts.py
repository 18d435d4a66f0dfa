"""A gated simulation's plan. The Prefix caching page's words moved to sim/words/prefix.py; JobPlan stays in
sim/ because sim/model/prefix_run.py builds one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JobPlan:
    """A simulation the page gates: its estimated seconds and what it does, in words."""

    estimate_s: float
    what: str
