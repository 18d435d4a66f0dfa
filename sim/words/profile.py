"""The Decode cost page's step profile in words (moved here from sim/model/step_profile.py): the operator
categories as the chart names them and the chart's title (catalog area decode_cost.json)."""

from __future__ import annotations

from sim.model.step_profile import OUTSIDE, StepProfile
from sim.words import text


def category_label(name: str, lang: str = "en") -> str:
    """A category (one of CATEGORIES, or OUTSIDE) as the chart and the title name it."""
    return text(lang, "decode.cat." + ("outside" if name == OUTSIDE else name.replace(" ", "_")))


def profile_takeaway(p: StepProfile, lang: str = "en") -> str:
    """The chart's title: the step's time against its FLOPs' own time, how bound it is, its operator calls
    and the largest share, in `lang`."""
    ratio = p.wall_s / p.math_s
    top = max(p.shares().items(), key=lambda kv: kv[1])
    bound = "overhead" if ratio > 10 else "close" if ratio < 2 else "few_times"
    return text(lang, "decode.prof.takeaway", context=f"{p.context:,}", wall=f"{p.wall_s * 1e6:,.0f}",
                mflop=f"{p.flops / 1e6:,.2f}", math=f"{p.math_s * 1e6:,.1f}", ratio=f"{ratio:,.0f}",
                bound=text(lang, f"decode.prof.bound.{bound}"), calls=f"{p.num_calls:,.0f}",
                top=category_label(top[0], lang), share=f"{top[1]:.0%}")
