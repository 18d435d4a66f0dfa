"""The sentence each lesson step states, built from the numbers its figure shows: every comparison is
worded by which side is larger, so it cannot contradict the chart beside it."""

from __future__ import annotations

from sim.cost.decode import human_flops
from sim.cost.memory import fmt_bytes
from sim.readout import small_change, times


def _times(a: float, b: float) -> str:
    """a ÷ b as '12.3×' (one decimal below 100, none above)."""
    return times(a / b, whole_from=100)


def repeat_claim(n: int, naive: int, cached: int, naive_half: int, cached_half: int) -> str:
    """Total FLOPs to generate n tokens both ways, and how each total grew from n/2 to n."""
    if naive > cached:
        head = (f"Generating {n:,} tokens without a cache costs {human_flops(naive)}, {_times(naive, cached)} the "
                f"{human_flops(cached)} of cached decoding")
    elif naive < cached:
        head = f"Generating {n:,} tokens costs less without a cache ({human_flops(naive)} vs {human_flops(cached)})"
    else:
        head = f"Generating {n:,} tokens costs {human_flops(naive)} either way"
    return (f"{head}. Doubling the length from {n // 2:,} multiplied the naive total by "
            f"{_times(naive, naive_half)} but the cached one by {_times(cached, cached_half)}.")


def qkv_claim(num_tokens: int) -> str:
    """Who reads what in causal attention over num_tokens positions (counted, not measured)."""
    t = num_tokens
    return (f"In a {t:,}-token sequence each query row is used once, by its own position; the key and value of "
            f"position j are read by every query from j on: the first position's {t:,} times, the last one's once "
            f"— {t * (t + 1) // 2:,} reads of K/V rows in all, which a cache serves from memory instead of "
            f"recomputing.")


def filling_sentence(step: int, fed: int, rows: int, layers: int, used_bytes: int, bytes_per_token: int) -> str:
    """What the frame shows: the rows this step appended and the cache's bytes after it."""
    what = (f"The prefill wrote the prompt's {fed:,} K and V rows in one pass" if step == 0 else
            f"Decode step {step:,} fed one token: its query was used once and dropped, its K and V row was appended")
    return (f"{what}, in each of the {layers} layers. The cache now holds {rows:,} rows per layer: "
            f"{rows:,} × {fmt_bytes(bytes_per_token)} per token = {fmt_bytes(used_bytes)}.")


def step_cost_claim(context: int, cached: int, naive: int, attention_share: float) -> str:
    """One step at `context` tokens: cached vs recomputing the whole sequence, and attention's share."""
    if naive > cached:
        head = (f"At {context:,} tokens a cached step costs {human_flops(cached)}, {_times(naive, cached)} less than "
                f"recomputing all {context:,} positions ({human_flops(naive)})")
    else:
        head = f"At {context:,} tokens a cached step costs {human_flops(cached)}, as much as a full recompute"
    return f"{head}; attention over the cache is {attention_share:.1%} of the cached step."


def bytes_claim(model: str, dtype: str, per_token: int, context: int, per_request: int, weights: int) -> str:
    head = (f"{model} in {dtype} keeps {fmt_bytes(per_token)} per token, so one request of {context:,} tokens holds "
            f"{fmt_bytes(per_request)} of cache")
    if per_request > weights:
        return f"{head}: more than the {fmt_bytes(weights)} of weights."
    return f"{head}: {per_request / weights:.1%} of the {fmt_bytes(weights)} of weights."


def batching_claim(turns: dict[int, int | None]) -> str:
    """{context: the batch from which decode turns compute-bound, or None if it never does}."""
    parts = [f"at {S:,} tokens it turns compute-bound from batch {b:,}" if b else
             f"at {S:,} tokens it stays memory-bound at every batch up to 4,096" for S, b in turns.items()]
    return "Batching raises a decode step's FLOPs per byte by sharing the weights read: " + "; ".join(parts) + "."


def shrink_claim(name_to_token_bytes: dict[str, int], dtype_to_token_bytes: dict[str, int], dtype: str) -> str:
    """Per-token bytes by attention kind (at `dtype`) and by dtype (for the model's own attention)."""
    mha = name_to_token_bytes["MHA"]
    smallest = min(name_to_token_bytes, key=name_to_token_bytes.get)
    low = min(dtype_to_token_bytes, key=dtype_to_token_bytes.get)
    return (f"Per token, {smallest} keeps {fmt_bytes(name_to_token_bytes[smallest])} against MHA's {fmt_bytes(mha)} "
            f"({_times(mha, name_to_token_bytes[smallest])} smaller) in {dtype.upper()}; storing the model's own "
            f"cache in {low.upper()} instead of {dtype.upper()} takes it from "
            f"{fmt_bytes(dtype_to_token_bytes[dtype])} to {fmt_bytes(dtype_to_token_bytes[low])}.")


def share_claim(paged_share: float, reserved_share: float, paged_running: float, reserved_running: float) -> str:
    if paged_share >= reserved_share:
        head = (f"Paged blocks keep {paged_share:.1%} of the memory they claim for real tokens, against "
                f"{reserved_share:.1%} when each request reserves its maximum length")
    else:
        head = (f"Reserving the maximum length keeps more of its claim for real tokens ({reserved_share:.1%}) than "
                f"paged blocks ({paged_share:.1%})")
    if paged_running >= reserved_running:
        tail = f"so {paged_running:,.1f} requests run at once instead of {reserved_running:,.1f}"
    else:
        tail = f"yet fewer requests run at once ({paged_running:,.1f} vs {reserved_running:,.1f})"
    return f"{head}, {tail}."


def speculate_claim(alpha: float, k: int, tokens_per_pass: float, speedup: float) -> str:
    gain = (f"{speedup:.2f}× faster than one token per pass" if speedup > 1 else
            f"{1 / speedup:.2f}× slower than one token per pass: the draft costs more than it saves" if speedup < 1
            else "exactly as fast as one token per pass")
    return (f"With {k} drafted tokens each accepted with probability {alpha:.2f}, one pass of the big model yields "
            f"{tokens_per_pass:.2f} tokens on average for one read of its weights and cache: {gain}.")


def layout_claim(fixed_hit: float, variable_hit: float) -> str:
    if fixed_hit > variable_hit:
        return (f"With the fixed content first, {fixed_hit:.1%} of prompt tokens are served from the cache; with the "
                f"variable part first only {variable_hit:.1%}: a block hits only if everything before it matches.")
    if fixed_hit < variable_hit:
        return (f"Here the variable-first layout hits more ({variable_hit:.1%} vs {fixed_hit:.1%}): the "
                f"\"variable\" part repeats across requests in this workload.")
    return f"Both layouts serve {fixed_hit:.1%} of prompt tokens from the cache in this workload."


# --- chart titles: the figure's own takeaway, shorter than the step's claim --------------------------------


def repeat_title(lengths: list[int], naive: list[int], cached: list[int]) -> str:
    a, b = lengths[-2], lengths[-1]
    return (f"From N = {a:,} to {b:,} tokens the naive total grows {_times(naive[-1], naive[-2])}, the cached one "
            f"{_times(cached[-1], cached[-2])}")


def qkv_title(layer: int, num_tokens: int) -> str:
    return (f"Layer {layer}, head 0, {num_tokens:,} positions: each row (a query) is used once; column j (a key and "
            f"value) is read by the {num_tokens:,} − j rows from j on")


def mask_title(with_mask: list[float], without: list[float]) -> str:
    c, f = max(with_mask), max(without)
    if c < f:
        return f"With the causal mask earlier outputs move by at most {small_change(c)}; without it by up to {small_change(f)}"
    if c > f:
        return f"Earlier outputs move more with the mask (up to {small_change(c)}) than without it (up to {small_change(f)})"
    return f"Earlier outputs move by at most {small_change(c)} with or without the mask"


def step_cost_title(model: str, context: int, naive: int, cached: int) -> str:
    if naive > cached:
        return f"{model} at {context:,} tokens: a naive step costs {_times(naive, cached)} a cached one"
    return f"{model} at {context:,} tokens: a naive step costs no more than a cached one"


def bytes_title(model: str, dtype: str, contexts: list[int], per_request: list[int], weights: int) -> str:
    over = next((S for S, b in zip(contexts, per_request, strict=True) if b > weights), None)
    if over is None:
        return (f"{model}, {dtype} cache: one request stays below the {fmt_bytes(weights)} of weights up to "
                f"{contexts[-1]:,} tokens")
    return f"{model}, {dtype} cache: one request's cache outgrows the {fmt_bytes(weights)} of weights by {over:,} tokens"


def ridge_title(turns: dict[int, int | None], ridge: float) -> str:
    reach = [S for S, b in turns.items() if b]
    n = len(turns)
    if not reach:
        return f"Decode stays below the ridge ({ridge:,.0f} FLOP/B) at every batch and context shown"
    if len(reach) == n:
        return f"Decode reaches the ridge ({ridge:,.0f} FLOP/B) at every context shown, given a large enough batch"
    return (f"Decode reaches the ridge ({ridge:,.0f} FLOP/B) only at {', '.join(f'{S:,}' for S in reach)} tokens "
            f"of context ({len(reach)} of {n} shown)")


def smallest_title(what: str, name_to_bytes: dict[str, int], against: str) -> str:
    low = min(name_to_bytes, key=name_to_bytes.get)
    base = name_to_bytes[against]
    if name_to_bytes[low] == base:
        return f"{what}: nothing here keeps less than {against}'s {fmt_bytes(base)} per token"
    return (f"{what}: {low} keeps {fmt_bytes(name_to_bytes[low])} per token, {_times(base, name_to_bytes[low])} less "
            f"than {against}'s {fmt_bytes(base)}")


def share_title(paged: float, reserved: float) -> str:
    if paged >= reserved:
        return f"Paged blocks keep {paged:.1%} of claimed memory for real tokens; reserving the maximum, {reserved:.1%}"
    return f"Reserving the maximum keeps {reserved:.1%} of claimed memory for real tokens; paged blocks, {paged:.1%}"


def speculate_title(alpha: float, k: int, tokens: float) -> str:
    return (f"At α = {alpha:.2f}, k = {k} drafted tokens yield {tokens:.2f} tokens per pass; no k yields more than "
            f"1 ÷ (1 − α) = {1 / (1 - alpha):.2f}")


def layout_title(fixed: float, variable: float) -> str:
    if fixed >= variable:
        return f"Fixed content first serves {fixed:.1%} of prompt tokens from the cache, variable first {variable:.1%}"
    return f"Variable content first serves {variable:.1%} of prompt tokens from the cache, fixed first {fixed:.1%}"
