"""The Serving page's measured speculative run in words (moved here from sim/model/speculative.py): the draft's
name and what the run shows (catalog area serving.json)."""

from __future__ import annotations

import math

from sim.model.speculative import C_FAR_ABOVE, VERIFY_ABOUT_ONE, SpecRun, draft_layers, target_layers
from sim.words import text


def draft_label(key: str, lang: str = "en") -> str:
    n = draft_layers(key)
    if n is not None:
        return text(lang, "serving.spec.draft_exit", n=n, total=target_layers())
    return text(lang, "serving.spec.draft_model", name=key.upper())


def spec_summary(run: SpecRun, lang: str = "en") -> str:
    """What the run shows (Markdown): tokens per pass, acceptance, identity, and the measured costs."""
    same = (text(lang, "serving.spec.same") if run.identical else
            text(lang, "serving.spec.differs", first=run.first_difference, dtype=run.dtype, device=run.device))
    return (
        text(lang, "serving.spec.head", passes=run.num_passes, tokens=len(run.new_ids),
             rate=f"{run.acceptance_rate:.0%}") + same
        + text(lang, "serving.spec.times", device=run.device, spec=f"{run.spec_s * 1e3:,.0f}",
               target=f"{run.target_s * 1e3:,.0f}", k1=run.k + 1, verify=f"{run.verify_s * 1e3:.2f}",
               step=f"{run.target_step_s * 1e3:.2f}")
        + spec_cost_summary(run, lang))

def spec_cost_summary(run: SpecRun, lang: str = "en") -> str:
    """The measured draft cost against the draft's share of the layers, the verify pass against one step,
    and whether speculation paid off here."""
    parts = []
    tl, dl, c = run.target_layers, run.draft_layers, run.c
    if tl and dl and math.isfinite(c):
        ratio = dl / tl
        where = ("c_far" if c >= C_FAR_ABOVE * ratio else "c_near" if c > ratio / C_FAR_ABOVE else "c_below")
        parts.append(text(lang, f"serving.spec.{where}", tl=tl, dl=dl, c=f"{c:.2f}", ratio=f"{ratio:.2f}"))
    elif math.isfinite(c):
        parts.append(text(lang, "serving.spec.c_only", c=f"{c:.2f}"))
    v = run.verify_steps
    if math.isfinite(v):
        parts.append(text(lang, "serving.spec.verify_costly" if v > VERIFY_ABOUT_ONE else "serving.spec.verify_one",
                          k1=run.k + 1, v=f"{v:.2f}"))
    parts.append(text(lang, "serving.spec.paid" if run.speedup > 1 else "serving.spec.not_paid",
                      x=f"{run.speedup:.2f}"))
    return " ".join(parts)
