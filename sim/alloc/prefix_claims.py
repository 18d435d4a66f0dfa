"""The seeds' claims about prefix caching, checked against the lab's own runs, and the sentences that
quote those runs (seed 002's 5x for agents, the branch run's finding).

Pure functions: every number comes from the result passed in. The real-model branch run (sim/model) is
read by its fields only, and the K/V change arrives as its own finding, so this module never imports torch.
"""

from __future__ import annotations

from sim.alloc.prefix_cache import HitTotals
from sim.alloc.prefix_sweeps import TwoPrompts, WorkloadOverview
from sim.alloc.workload import TIMESTAMP_LEN
from sim.claims import Claim, Verdict

NOT_RUN = "turn on the real model (section 5)"


def agent_finding(agent: HitTotals, decode_weight: float) -> str:
    return (f"simulated agent loop: {100 * agent.hit_rate:.1f}% hit, prefill {agent.prefill_speedup:.2f}× less, "
            f"throughput ≈ {agent.throughput_gain(decode_weight):.2f}× (decode step = {decode_weight:g} prefill tokens)")


def agent_paragraph(agent: HitTotals, decode_weight: float) -> str:
    """Seed 002's 'about 5x for agents' against the simulated agent loop (Markdown)."""
    gain = agent.throughput_gain(decode_weight)
    if f"{gain:.2f}" == "5.00":
        versus = "the seed's 5×"
    elif gain < 5:
        versus = "short of the seed's 5×"
    else:
        versus = "past the seed's 5×"
    return (
        f"Seed 002 says agent workloads with repeated tool prompts *often get about 5× throughput* from prefix "
        f"caching. With the sizes above the simulated agent loop hits **{100 * agent.hit_rate:.1f}%** of its "
        f"prompt tokens, so its prefill work drops **{agent.prefill_speedup:.2f}×**; counting each decode step "
        f"as {decode_weight:g} prefill tokens the whole run gets **{gain:.2f}×** faster, {versus}. The 5× is not a constant: it needs a hit rate of at least 80% (1 / (1 − 0.8) = 5) *and* prompts "
        "long enough that prefill dominates. Shorter tool descriptions, longer answers or a cache too small for the "
        "running agents all shrink it."
    )


def timestamp_why(overview: WorkloadOverview | None) -> str:
    """What moving the timestamp to the top did to the hit rate, worded by which way it went."""
    if overview is None:
        return f"A {TIMESTAMP_LEN}-token timestamp at the top changes every block after it (section 2)."
    below, above = (100 * overview.get("timestamp", layout).hit_rate for layout in ("fixed_first", "variable_first"))
    if f"{below:.1f}" == f"{above:.1f}":
        return f"A {TIMESTAMP_LEN}-token timestamp at the top leaves the hit rate at {below:.1f}%."
    verb = "drops" if above < below else "raises"
    return f"A {TIMESTAMP_LEN}-token timestamp at the top {verb} the hit rate from {below:.1f}% to {above:.1f}%."


def branch_finding(run) -> str:
    """A sim.model.prefix_run branch run, in the seeds table's words."""
    return (f"{run.num_branches} branches on a {len(run.prefix_ids)}-byte prefix: prefill time "
            f"−{100 * run.prefill_saved_share:.0f}% (tokens −{100 * run.token_saved_share:.0f}%), tokens "
            f"{'identical' if run.tokens_identical else 'DIFFERENT'}")


def prefix_claims(demo: TwoPrompts | None, overview: WorkloadOverview | None, decode_weight: float,
                  real: str | None = None, kv: str | None = None) -> tuple[Claim, ...]:
    """The seeds' claims with what this run of the page computed. A section that did not run (bad settings,
    the real model off) is named instead of its numbers."""

    def hit(workload: str, layout: str) -> str:
        return "?" if overview is None else f"{100 * overview.get(workload, layout).hit_rate:.1f}%"

    demo_text = "section 1" if demo is None else demo.finding()
    agent = None if overview is None else overview.get("agent", "fixed_first")
    return (
        Claim(
            statement="A prompt (prefix) cache only works for a contiguous prefix from the start; one changed byte "
                      "invalidates everything after it.",
            seed="000", claimed="one changed byte invalidates every later block",
            computed=f"{demo_text}; on the real model {kv or NOT_RUN}.", verdict=Verdict.RIGHT,
            why="In the first layer only the changed position differs; every deeper layer differs at every later "
                "position, so the whole rest must be recomputed."),
        Claim(
            statement="Put fixed content first and variable content last.", seed="000",
            claimed="fixed content first, variable content last",
            computed=f"RAG, documents before the question: {hit('rag', 'fixed_first')} hit, after it: "
                     f"{hit('rag', 'variable_first')}. Timestamp below the system prompt: "
                     f"{hit('timestamp', 'fixed_first')}, above it: {hit('timestamp', 'variable_first')}.",
            verdict=Verdict.RIGHT, why=timestamp_why(overview)),
        Claim(
            statement="Prefix caching reuses the KV of identical system prompts, few-shot examples and long "
                      "documents across calls.", seed="002", claimed="reused across calls",
            computed=f"Shared system prompt: {hit('system_prompt', 'fixed_first')} of prompt tokens hit (section 2).",
            verdict=Verdict.RIGHT,
            why="As long as the cache holds them until the next call (section 3) and the layout keeps them first."),
        Claim(
            statement="Agent workloads with repeated tool prompts often get about 5× throughput from prefix caching "
                      "alone.", seed="002", claimed="about 5× throughput",
            computed="section 2" if agent is None else agent_finding(agent, decode_weight),
            verdict=Verdict.NEEDS_CONTEXT,
            why="5× is what an 80% hit rate gives when prefill dominates. It depends on prompt vs output length, hit "
                "rate and cache size; the simulation gives the number above.",
            value=None if agent is None else agent.throughput_gain(decode_weight)),
        Claim(
            statement="Exercise: prefill P once, branch the completions from its cache, measure the speed-up vs "
                      "re-encoding P.", seed="002", claimed="a speed-up over re-encoding P",
            computed=real or NOT_RUN, verdict=Verdict.RIGHT,
            why="Done live in section 5; identical tokens are checked every run."),
    )
