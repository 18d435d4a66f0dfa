"""The Attention masks page's sentences, each worded from the result its chart or caption shows: what a mask
allows against a plain causal mask, where one query row's weight goes under each way of applying the mask,
what a sliding window takes from the causal map, and the measured fully masked row. Pure functions of numpy
arrays and plain numbers (no torch), so they are tested on matrices worked by hand."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# how each sim.attention.masks.VARIANTS entry is named inside a sentence
VARIANT_SHORT = {
    "neg_inf": "adding −inf",
    "times_zero": "multiplying by 0",
    "neg_1e4": "adding −1e4",
    "neg_1e9": "adding −1e9",
    "neg_1e4_fp16": "adding −1e4 in fp16",
    "neg_1e9_fp16": "adding −1e9 in fp16",
}


def _join(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _s(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def share(x: float) -> str:
    """A share of one with 1 decimal, never rounded to a 0% or 100% it is not."""
    if x == 0 or x == 1:
        return f"{x:.0%}"
    if x < 0.0005:
        return "under 0.1%"
    if x > 0.9995:
        return "over 99.9%"
    return f"{x:.1%}"


def mask_name(kind: str, window: int, prefix_len: int, pad: int = 0) -> str:
    """The mask as a sentence names it: 'sliding-window mask (w = 4)', 'causal mask, left-padded by 2,'."""
    name = {"causal": "causal mask", "sliding_window": f"sliding-window mask (w = {window:,})",
            "prefix_lm": f"prefix-LM mask (p = {prefix_len:,})", "document": "document mask (packing)",
            "bidirectional": "bidirectional mask"}[kind]
    return name + (f", left-padded by {pad:,}," if pad else "")


def mask_takeaway(mask: np.ndarray, name: str) -> str:
    """The mask chart's title: the query–key pairs the (T, T) boolean mask allows, against a plain causal
    mask of the same size, and how many keys each query sees."""
    n = mask.shape[0]
    allowed, total = int(mask.sum()), n * n
    causal = n * (n + 1) // 2
    head = f"The {name} lets {allowed:,} of {total:,} query–key pairs attend ({share(allowed / total)})"
    if np.array_equal(mask, np.tril(np.ones((n, n), dtype=bool))):
        return f"{head}: each query sees itself and every key before it, none after"
    if allowed < causal:
        against = f"{causal - allowed:,} fewer than a plain causal mask's {causal:,}"
    elif allowed > causal:
        against = f"{allowed - causal:,} more than a plain causal mask's {causal:,}"
    else:
        against = f"as many as a plain causal mask's {causal:,}, but not the same ones"
    per_row = mask.sum(1)
    seen = per_row[per_row > 0]
    empty = int((per_row == 0).sum())
    if not len(seen):
        keys = "no query sees any key"
    elif seen.min() == seen.max() == n:
        keys = f"every query sees all {n:,} keys"
    elif seen.min() == seen.max():
        keys = f"each query sees {_s(int(seen.min()), 'key')}"
    else:
        keys = f"each query sees {int(seen.min()):,}–{int(seen.max()):,} keys"
    if empty and len(seen):
        keys += f", and {_s(empty, 'query row')} see{'s' if empty == 1 else ''} none"
    return f"{head}, {against}; {keys}"


def _leak(w: np.ndarray, masked: np.ndarray) -> float:
    return float("nan") if np.isnan(w).any() else float(w[masked].sum())


def row_takeaway(row: int, key_to_weights: dict[str, np.ndarray], allowed: np.ndarray) -> str:
    """The row-weights chart's title: the weight one query row puts on its masked keys under each way of applying
    the mask (keys of VARIANT_SHORT), most first; or, when the row has no masked key, how far the ways differ."""
    masked = ~allowed.astype(bool)
    m = int(masked.sum())
    names = {k: VARIANT_SHORT.get(k, k) for k in key_to_weights}
    if m == 0:
        ws = list(key_to_weights.values())
        diff = max(float(np.nanmax(np.abs(w - ws[0]))) for w in ws)
        agree = "give identical weights" if diff == 0 else f"give weights within {diff:.3g} of each other"
        return f"Query row {row:,} may attend to every key, so nothing can leak: the {len(ws)} ways {agree}"
    leak = {k: _leak(w, masked) for k, w in key_to_weights.items()}
    nan = [names[k] for k, x in leak.items() if np.isnan(x)]
    leaks = sorted((k for k, x in leak.items() if x > 0), key=lambda k: -leak[k])
    none = [names[k] for k, x in leak.items() if x == 0]
    clauses = []
    if leaks:
        first, *rest = leaks
        clauses.append(f"{names[first]} puts {share(leak[first])} of its weight on the {_s(m, 'masked key')}"
                       + "".join(f", {names[k]} {share(leak[k])}" for k in rest))
    if none:
        verb = ("puts" if len(none) == 1 else "put") + (" none there" if leaks else f" none on its {_s(m, 'masked key')}")
        clauses.append(f"{_join(none)} {verb}")
    if nan:
        clauses.append(f"{_join(nan)} give{'s' if len(nan) == 1 else ''} NaN")
    return f"Query row {row:,}: " + "; ".join(clauses)


def window_takeaway(causal_probs: np.ndarray, window: int, layer: int, head: int) -> str:
    """The attention-maps chart's title: the share of the causal map's weight that sits on keys a sliding window
    of `window` removes, over the rows that lose keys, and whether most of it already sat inside the window."""
    n = causal_probs.shape[0]
    where = f"Layer {layer:,}, head {head:,}"
    if window >= n:
        return (f"{where}: a window of {window:,} reaches back over all {n:,} tokens, so it removes no key and both "
                "maps show causal attention")
    i, j = np.indices((n, n))
    removed = np.where(i - j >= window, causal_probs, 0.0).sum(1)[window:]  # rows window.. lose keys
    mean, worst = float(removed.mean()), int(removed.argmax())
    if mean < 0.5:
        most = "most of it already sat inside the window"
    elif mean > 0.5:
        most = "most of it sat outside the window and moves to the keys left"
    else:
        most = "half of it sat outside the window"
    lose = "loses" if n - window == 1 else "lose"
    return (f"{where}: in the {_s(n - window, 'row')} that {lose} keys, the w = {window:,} window removes "
            f"{share(mean)} of the causal weight on average (up to {share(float(removed[worst]))}, row "
            f"{worst + window:,}), so {most}")


def window_caption(same: int, n: int, window: int) -> str:
    """What the window removes, and at how many positions the model's next-byte guess survives it."""
    if window >= n:
        what = f"A window of {window:,} removes no key of these {_s(n, 'token')}."
    elif window == 1:
        what = "A window of 1 leaves each query only itself: all the weight goes to its own key."
    else:
        what = (f"The window removes every key more than {_s(window - 1, 'position')} back; the weight it held is spread "
                "over the keys that remain.")
    if same == n:
        guess = f"is the same at all {_s(n, 'position')}"
    elif same == 0:
        guess = f"changes at every one of the {_s(n, 'position')}"
    else:
        guess = f"changes at {n - same:,} of {_s(n, 'position')} and stays the same at {same:,}"
    return f"{what} The model was trained with full causal attention; under the window its next-byte guess {guess}."


def leak_caption(key_to_mean_leak: dict[str, float], num_masked: int) -> str:
    """The leak table's caption: which ways of applying the mask leak, by their mean leaked mass per row."""
    what = "Leaked mass: the probability a query gives to keys its mask forbids."
    if num_masked == 0:
        return f"{what} This mask forbids no key, so no way of applying it can leak."
    names = {k: VARIANT_SHORT.get(k, k) for k in key_to_mean_leak}
    leaks = sorted((k for k, x in key_to_mean_leak.items() if x > 0), key=lambda k: -key_to_mean_leak[k])
    none = [k for k, x in key_to_mean_leak.items() if x == 0]
    said = []
    if leaks:
        said.append(", ".join(f"{names[k]} leaks {share(key_to_mean_leak[k])}" for k in leaks) + " of a row's weight")
    if none:
        said.append(f"{_join([names[k] for k in none])} leak{'s' if len(none) == 1 else ''} nothing")
    why = []
    if "times_zero" in leaks:
        why.append("×0 leaks because a zeroed score still weighs e⁰ = 1 against the others.")
    if {"neg_1e4", "neg_1e9"} & set(none):
        why.append("A large finite negative leaks nothing here because e^−10000 underflows to 0 in fp32.")
    why.append("fp16 cannot hold −1e9: it overflows to −∞, and fp16 softmax rounds the weights themselves.")
    text = "; ".join(said)
    return f"{what} Averaged over rows, {text}. " + " ".join(why)


def _outcome(description: str) -> str:
    for start, kind in (("NaN", "nan"), ("all zeros", "zeros"), ("uniform", "uniform"),
                        ("not available", "unavailable")):
        if description.startswith(start):
            return kind
    return "finite"


_VERBS = {"nan": ("returns NaN", "return NaN"), "zeros": ("returns zeros", "return zeros"),
          "uniform": ("returns a uniform row", "return a uniform row"),
          "unavailable": ("is not available", "are not available"),
          "finite": ("returns finite values", "return finite values")}


def masked_row_caption(where_to_result: dict[str, str]) -> str:
    """The fully-masked-row table's caption, from what was measured (sim.attention.masks.fully_masked_row_behaviour)."""
    parts = ["A left-pad query has no key to attend to."]
    plain = where_to_result.get("softmax with −inf")
    if plain is not None:
        kind = _outcome(plain)
        parts.append("Plain softmax over all −∞ returns NaN (0/0), and NaN spreads through every later layer."
                     if kind == "nan" else f"Plain softmax over all −∞ {_VERBS[kind][0]} here.")
    big = where_to_result.get("softmax with −1e9")
    if big is not None:
        parts.append(f"A large finite negative (−1e9) {_VERBS[_outcome(big)][0]} instead"
                     + (", attending to everything it should not." if _outcome(big) == "uniform" else "."))
    groups: dict[str, list[str]] = {}
    for where, result in where_to_result.items():
        if where.startswith("SDPA "):
            groups.setdefault(_outcome(result), []).append(where.removeprefix("SDPA "))
    if groups:
        said = [f"{_join(names)} {_VERBS[kind][len(names) > 1]}" for kind, names in groups.items()]
        parts.append("Of torch's SDPA kernels, measured just now on this device, " + "; ".join(said) + ".")
    return " ".join(parts)
