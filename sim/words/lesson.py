"""The Lesson's words (moved here from sim/lesson/): the sentence each step states, built from the numbers its
figure shows (every comparison worded by which side is larger, so it cannot contradict the chart beside it), the
steps' titles and ideas, the attention walk's and the block story's sentences, and the check-yourself questions'
messages, in either language (catalog area lesson.json)."""

from __future__ import annotations

import numpy as np

from sim.cost.decode import human_flops
from sim.cost.memory import fmt_bytes
from sim.lesson.blocks import REQUESTS, Frame
from sim.lesson.steps import Step
from sim.lesson.steps import step_label as _step_label
from sim.lesson.walk import AttentionWalk
from sim.readout import small_change, times
from sim.words import say, text


def _times(a: float, b: float) -> str:
    """a ÷ b as '12.3×' (one decimal below 100, none above)."""
    return times(a / b, whole_from=100)


def repeat_claim(n: int, naive: int, cached: int, naive_half: int, cached_half: int, lang: str = "en") -> str:
    """Total FLOPs to generate n tokens both ways, and how each total grew from n/2 to n."""
    nums = dict(n=f"{n:,}", naive=human_flops(naive), cached=human_flops(cached))
    if naive > cached:
        head = text(lang, "lesson.s.repeat.more", x=_times(naive, cached), **nums)
    elif naive < cached:
        head = text(lang, "lesson.s.repeat.less", **nums)
    else:
        head = text(lang, "lesson.s.repeat.same", **nums)
    return text(lang, "lesson.s.repeat.tail", head=head, half=f"{n // 2:,}", xn=_times(naive, naive_half),
                xc=_times(cached, cached_half))


def qkv_claim(num_tokens: int, lang: str = "en") -> str:
    """Who reads what in causal attention over num_tokens positions (counted, not measured)."""
    t = num_tokens
    return text(lang, "lesson.s.qkv", t=f"{t:,}", reads=f"{t * (t + 1) // 2:,}")


def filling_sentence(step: int, fed: int, rows: int, layers: int, used_bytes: int, bytes_per_token: int,
                     lang: str = "en") -> str:
    """What the frame shows: the rows this step appended and the cache's bytes after it."""
    what = (text(lang, "lesson.s.fill.prefill", fed=f"{fed:,}") if step == 0 else
            text(lang, "lesson.s.fill.decode", step=f"{step:,}"))
    return text(lang, "lesson.s.fill.tail", what=what, layers=f"{layers}", rows=f"{rows:,}",
                bpt=fmt_bytes(bytes_per_token), used=fmt_bytes(used_bytes))


def step_cost_claim(context: int, cached: int, naive: int, attention_share: float, lang: str = "en") -> str:
    """One step at `context` tokens: cached vs recomputing the whole sequence, and attention's share."""
    nums = dict(ctx=f"{context:,}", cached=human_flops(cached), naive=human_flops(naive))
    if naive > cached:
        head = text(lang, "lesson.s.step.more", x=_times(naive, cached), **nums)
    else:
        head = text(lang, "lesson.s.step.same", **nums)
    return text(lang, "lesson.s.step.tail", head=head, share=f"{attention_share:.1%}")


def bytes_claim(model: str, dtype: str, per_token: int, context: int, per_request: int, weights: int,
                lang: str = "en") -> str:
    head = text(lang, "lesson.s.bytes.head", model=model, dtype=dtype, per_token=fmt_bytes(per_token),
                ctx=f"{context:,}", per_request=fmt_bytes(per_request))
    if per_request > weights:
        return text(lang, "lesson.s.bytes.over", head=head, weights=fmt_bytes(weights))
    return text(lang, "lesson.s.bytes.share", head=head, share=f"{per_request / weights:.1%}",
                weights=fmt_bytes(weights))


def batching_claim(turns: dict[int, int | None], max_batch: int = 4096, lang: str = "en") -> str:
    """{context: the batch from which decode turns compute-bound, or None if it never does}."""
    parts = [text(lang, "lesson.s.batch.turns", S=f"{S:,}", b=f"{b:,}") if b else
             text(lang, "lesson.s.batch.stays", S=f"{S:,}", max=f"{max_batch:,}") for S, b in turns.items()]
    return text(lang, "lesson.s.batch.head", parts=text(lang, "lesson.s.batch.sep").join(parts))


def _against_ridge(intensity: float, ridge: float, lang: str) -> str:
    """'memory-bound, 281× below the ridge' / 'compute-bound, 8.5× above it' / 'exactly at the ridge'."""
    if intensity < ridge:
        return text(lang, "lesson.s.roof.below", x=times(ridge / intensity))
    if intensity > ridge:
        return text(lang, "lesson.s.roof.above", x=times(intensity / ridge))
    return text(lang, "lesson.s.roof.at")


def roofline_takeaway(decode_intensity: float, prefill_intensity: float, ridge: float, lang: str = "en") -> str:
    """Where decode and prefill sit against the ridge (as sim.cost.roofline.roofline_takeaway words it in
    English: decode's intensity with 2 decimals, prefill's and the ridge's rounded)."""
    return text(lang, "lesson.s.roof.takeaway", di=f"{decode_intensity:,.2f}", pi=f"{prefill_intensity:,.0f}",
                ridge=f"{ridge:,.0f}", dec=_against_ridge(decode_intensity, ridge, lang),
                pre=_against_ridge(prefill_intensity, ridge, lang))


def roofline_title(model: str, gpu: str, batch: int, context: int, takeaway: str, lang: str = "en") -> str:
    return text(lang, "lesson.s.roof.title", model=model, gpu=gpu, batch=f"{batch:,}", ctx=f"{context:,}",
                takeaway=takeaway)


def shrink_claim(name_to_token_bytes: dict[str, int], dtype_to_token_bytes: dict[str, int], dtype: str,
                 lang: str = "en") -> str:
    """Per-token bytes by attention kind (at `dtype`) and by dtype (for the model's own attention)."""
    mha = name_to_token_bytes["MHA"]
    smallest = min(name_to_token_bytes, key=name_to_token_bytes.get)
    low = min(dtype_to_token_bytes, key=dtype_to_token_bytes.get)
    return text(lang, "lesson.s.shrink", smallest=smallest, sb=fmt_bytes(name_to_token_bytes[smallest]),
                mha=fmt_bytes(mha), x=_times(mha, name_to_token_bytes[smallest]), dtype=dtype.upper(),
                low=low.upper(), a=fmt_bytes(dtype_to_token_bytes[dtype]), b=fmt_bytes(dtype_to_token_bytes[low]))


def share_claim(paged_share: float, reserved_share: float, paged_running: float, reserved_running: float,
                lang: str = "en") -> str:
    nums = dict(p=f"{paged_share:.1%}", r=f"{reserved_share:.1%}", pr=f"{paged_running:,.1f}",
                rr=f"{reserved_running:,.1f}")
    head = text(lang, "lesson.s.share.paged" if paged_share >= reserved_share else "lesson.s.share.reserved", **nums)
    tail = text(lang, "lesson.s.share.more" if paged_running >= reserved_running else "lesson.s.share.fewer", **nums)
    return text(lang, "lesson.s.share.claim", head=head, tail=tail)


def speculate_claim(alpha: float, k: int, tokens_per_pass: float, speedup: float, lang: str = "en") -> str:
    gain = (text(lang, "lesson.s.spec.faster", x=f"{speedup:.2f}") if speedup > 1 else
            text(lang, "lesson.s.spec.slower", x=f"{1 / speedup:.2f}") if speedup < 1 else
            text(lang, "lesson.s.spec.same"))
    return text(lang, "lesson.s.spec.claim", k=f"{k}", a=f"{alpha:.2f}", t=f"{tokens_per_pass:.2f}", gain=gain)


def layout_claim(fixed_hit: float, variable_hit: float, lang: str = "en") -> str:
    nums = dict(f=f"{fixed_hit:.1%}", v=f"{variable_hit:.1%}")
    if fixed_hit > variable_hit:
        return text(lang, "lesson.s.layout.fixed", **nums)
    if fixed_hit < variable_hit:
        return text(lang, "lesson.s.layout.variable", **nums)
    return text(lang, "lesson.s.layout.same", **nums)


# --- chart titles: the figure's own takeaway, shorter than the step's claim --------------------------------


def repeat_title(lengths: list[int], naive: list[int], cached: list[int], lang: str = "en") -> str:
    a, b = lengths[-2], lengths[-1]
    return text(lang, "lesson.t.repeat", a=f"{a:,}", b=f"{b:,}", xn=_times(naive[-1], naive[-2]),
                xc=_times(cached[-1], cached[-2]))


def qkv_title(layer: int, num_tokens: int, lang: str = "en") -> str:
    return text(lang, "lesson.t.qkv", layer=f"{layer}", n=f"{num_tokens:,}")


def mask_title(with_mask: list[float], without: list[float], lang: str = "en") -> str:
    c, f = max(with_mask), max(without)
    if c == 0:  # "moves by at most 0" says less than what happened: nothing moved
        return text(lang, "lesson.t.mask.none" if f > 0 else "lesson.t.mask.none_both", f=small_change(f))
    key = "lesson.t.mask.less" if c < f else "lesson.t.mask.more" if c > f else "lesson.t.mask.same"
    return text(lang, key, c=small_change(c), f=small_change(f))


def mask_caption(max_diff_k: float, max_diff_v: float, lang: str = "en") -> str:
    """The append chart's caption: how far the cached K and V moved with the causal mask (exactly 0 on this
    model, worded as such)."""
    if max_diff_k == 0 and max_diff_v == 0:
        return text(lang, "lesson.cap.mask_none")
    return text(lang, "lesson.cap.mask", k=small_change(max_diff_k), v=small_change(max_diff_v))


def filling_title(layer: int, step: int, fed: str, picked: str, rows: int, lang: str = "en") -> str:
    """fed, picked: already escaped for plotly (they are the model's bytes, from the user's prompt)."""
    return text(lang, "lesson.t.fill", layer=f"{layer}", t=f"{step}", fed=fed, picked=picked, rows=f"{rows}")


def growing_title(bytes_per_token: int, used_bytes: int, step: int, lang: str = "en") -> str:
    # in the binary units of the step's sentence and the chart's KiB axis ("4 KiB", "112 KiB"), not raw bytes
    return text(lang, "lesson.t.grow", bpt=fmt_bytes(bytes_per_token), used=fmt_bytes(used_bytes), t=f"{step}")


def step_cost_title(model: str, context: int, naive: int, cached: int, lang: str = "en") -> str:
    if naive > cached:
        return text(lang, "lesson.t.step.more", model=model, ctx=f"{context:,}", x=_times(naive, cached))
    return text(lang, "lesson.t.step.same", model=model, ctx=f"{context:,}")


def bytes_title(model: str, dtype: str, contexts: list[int], per_request: list[int], weights: int,
                lang: str = "en", over: int | None = None) -> str:
    """over: the exact first context past the weights (memory.first_context_over); else the first plotted one."""
    if over is None:
        over = next((S for S, b in zip(contexts, per_request, strict=True) if b > weights), None)
    if over is None:
        return text(lang, "lesson.t.bytes.below", model=model, dtype=dtype, w=fmt_bytes(weights),
                    max=f"{contexts[-1]:,}")
    return text(lang, "lesson.t.bytes.over", model=model, dtype=dtype, w=fmt_bytes(weights), over=f"{over:,}")


def ridge_title(turns: dict[int, int | None], ridge: float, lang: str = "en") -> str:
    reach = [S for S, b in turns.items() if b]
    n, r = len(turns), f"{ridge:,.0f}"
    if not reach:
        return text(lang, "lesson.t.ridge.none", r=r)
    if len(reach) == n:
        return text(lang, "lesson.t.ridge.all", r=r)
    return text(lang, "lesson.t.ridge.some", r=r, list=", ".join(f"{S:,}" for S in reach), m=f"{len(reach)}",
                n=f"{n}")


def smallest_title(what: str, name_to_bytes: dict[str, int], against: str, lang: str = "en") -> str:
    low = min(name_to_bytes, key=name_to_bytes.get)
    base = name_to_bytes[against]
    if name_to_bytes[low] == base:
        return text(lang, "lesson.t.small.none", what=what, against=against, b=fmt_bytes(base))
    return text(lang, "lesson.t.small.less", what=what, low=low, lb=fmt_bytes(name_to_bytes[low]),
                x=_times(base, name_to_bytes[low]), against=against, b=fmt_bytes(base))


def share_title(paged: float, reserved: float, lang: str = "en") -> str:
    key = "lesson.t.share.paged" if paged >= reserved else "lesson.t.share.reserved"
    return text(lang, key, p=f"{paged:.1%}", r=f"{reserved:.1%}")


def speculate_title(alpha: float, k: int, tokens: float, lang: str = "en") -> str:
    return text(lang, "lesson.t.spec", a=f"{alpha:.2f}", k=f"{k}", t=f"{tokens:.2f}", cap=f"{1 / (1 - alpha):.2f}")


def layout_title(fixed: float, variable: float, lang: str = "en") -> str:
    key = "lesson.t.layout.fixed" if fixed >= variable else "lesson.t.layout.variable"
    return text(lang, key, f=f"{fixed:.1%}", v=f"{variable:.1%}")


# --- the steps, the attention walk, the block story -------------------------------------------------------


def step_title(step: Step, lang: str = "en") -> str:
    return say(lang, step.title)


def step_idea(step: Step, lang: str = "en") -> str:
    return say(lang, step.idea)


def step_label(k: int, lang: str = "en") -> str:
    """`Step k of N: title` for k = 1..N; the recap's label for k = RECAP."""
    return say(lang, _step_label(k))


def walk_sentence(w: AttentionWalk, stage: int, lang: str = "en") -> str:
    """What the stage shows, with its numbers."""
    T, D = w.keys.shape
    if stage == 0:
        return text(lang, "lesson.walk.s0", p=f"{w.position}", d=f"{D}", layer=f"{w.layer}", head=f"{w.head}")
    if stage == 1:
        hi, lo = int(np.argmax(w.scores)), int(np.argmin(w.scores))
        return text(lang, "lesson.walk.s1", t=f"{T}", d=f"{D}", hi=f"{hi}", s_hi=f"{w.scores[hi]:.2f}", lo=f"{lo}",
                    s_lo=f"{w.scores[lo]:.2f}")
    if stage == 2:
        order = np.argsort(w.weights)[::-1]
        top = int(order[0])
        return text(lang, "lesson.walk.s2", top=f"{top}", w=f"{w.weights[top]:.1%}",
                    three=f"{w.weights[order[:3]].sum():.1%}", gap=f"{w.max_weight_gap:.1e}")
    return text(lang, "lesson.walk.s3", t=f"{T}", d=f"{D}", norm=f"{np.linalg.norm(w.output):.2f}")


def walk_title(w: AttentionWalk, stage: int, lang: str = "en") -> str:
    return text(lang, f"lesson.walk.t{stage}", p=f"{w.position}", layer=f"{w.layer}", head=f"{w.head}")


def _plural(n: int) -> str:
    return "one" if n == 1 else "other"


def _ids(blocks) -> str:
    return ", ".join(f"#{b}" for b in blocks)


def event_sentence(frame: Frame, lang: str = "en") -> str:
    """What the frame's event did, with the pool's own block ids and counts."""
    e, pool = frame.event, frame.pool
    name = REQUESTS[e.req] if e.req >= 0 else ""
    if e.kind == "start":
        return text(lang, "lesson.bt.start", n=f"{pool.num_blocks}", bs=f"{pool.block_size}")
    if e.kind == "allocate":
        last = e.num_tokens - (len(e.new_blocks) - 1) * pool.block_size
        return text(lang, "lesson.bt.allocate", r=name, t=f"{e.num_tokens}", k=f"{len(e.new_blocks)}",
                    blocks=_ids(e.new_blocks), last=f"{last}", bs=f"{pool.block_size}")
    if e.kind == "share":
        table = pool.req_to_block_table[e.req]
        parent = next(r for r, t in pool.req_to_block_table.items() if r != e.req and t == table)
        refs = {int(pool.ref_cnt[b]) for b in table}
        assert len(refs) == 1
        return text(lang, "lesson.bt.share", r=name, p=REQUESTS[parent], blocks=_ids(table), ref=f"{refs.pop()}")
    if e.kind in ("cow", "grow") and e.copied:
        (src, dst), = e.copied
        other = next(r for r, t in pool.req_to_block_table.items() if src in t)
        return text(lang, "lesson.bt.cow", r=name, src=f"#{src}", dst=f"#{dst}", o=REQUESTS[other])
    if e.kind in ("cow", "grow"):
        last = pool.req_to_block_table[e.req][-1]
        if e.new_blocks:
            return text(lang, "lesson.bt.grow_new", r=name, t=f"{e.num_tokens}", new=_ids(e.new_blocks))
        return text(lang, f"lesson.bt.grow.{_plural(e.num_tokens)}", r=name, t=f"{e.num_tokens}", b=f"#{last}",
                    ref=f"{pool.ref_cnt[last]}")
    if e.kept:
        other = next(r for r, t in pool.req_to_block_table.items() if set(e.kept) <= set(t))
        return text(lang, f"lesson.bt.free_kept.{_plural(len(e.freed))}", r=name, freed=_ids(e.freed), kept=_ids(e.kept), o=REQUESTS[other])
    return text(lang, f"lesson.bt.free.{_plural(len(e.freed))}", r=name, freed=_ids(e.freed))
