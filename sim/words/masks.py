"""The Attention masks page's sentences, each worded from the result its chart or caption shows: what a mask allows
against a plain causal mask, where one query row's weight goes under each way of applying the mask, what a sliding
window takes from the causal map, and the measured fully masked row. Pure functions of numpy arrays and plain
numbers (no torch), so they are tested on matrices worked by hand. Each takes `lang` ("en" or "ko") and words its
sentence from the catalogs (sim/words); numbers are formatted here, the same in both. Moved here from
sim/attention/mask_readouts.py."""

from __future__ import annotations

import numpy as np

from sim.words import join, text

# how each sim.attention.masks.VARIANTS entry is named inside a sentence, in English
VARIANT_SHORT = {k: text("en", f"masks.s.short.{k}")
                 for k in ("neg_inf", "times_zero", "neg_1e4", "neg_1e9", "neg_1e4_fp16", "neg_1e9_fp16")}


def variant_label(key: str, lang: str = "en") -> str:
    """A way of applying the mask as its table row and legend name it ('add −inf (fp32)')."""
    return text(lang, f"masks.s.variant.{key}")


def _short(key: str, lang: str) -> str:
    return text(lang, f"masks.s.short.{key}") if key in VARIANT_SHORT else key


def _n(lang: str, n: int, word: str) -> str:
    """'3 keys', '1 key'; '키 3개' (a counted word: .one and .other in the catalog)."""
    return text(lang, f"masks.s.n.{word}.{'one' if n == 1 else 'other'}", n=f"{n:,}")


def _one(n: int) -> str:
    return "one" if n == 1 else "other"


def share(x: float, lang: str = "en") -> str:
    """A share of one with 1 decimal, never rounded to a 0% or 100% it is not."""
    if x == 0 or x == 1:
        return f"{x:.0%}"
    if x < 0.0005:
        return text(lang, "masks.s.under")
    if x > 0.9995:
        return text(lang, "masks.s.over")
    return f"{x:.1%}"


def mask_name(kind: str, window: int, prefix_len: int, pad: int = 0, lang: str = "en") -> str:
    """The mask as a sentence names it: 'sliding-window mask (w = 4)', 'causal mask, left-padded by 2,'."""
    name = text(lang, f"masks.s.name.{kind}", w=f"{window:,}", p=f"{prefix_len:,}")
    return text(lang, "masks.s.name.padded", name=name, pad=f"{pad:,}") if pad else name


def mask_takeaway(mask: np.ndarray, name: str, lang: str = "en") -> str:
    """The mask chart's title: the query–key pairs the (T, T) boolean mask allows, against a plain causal
    mask of the same size, and how many keys each query sees."""
    n = mask.shape[0]
    allowed, total = int(mask.sum()), n * n
    causal = n * (n + 1) // 2
    head = text(lang, "masks.s.mask.head", name=name, allowed=f"{allowed:,}", total=f"{total:,}",
                share=share(allowed / total, lang))
    if np.array_equal(mask, np.tril(np.ones((n, n), dtype=bool))):
        return text(lang, "masks.s.mask.causal", head=head)
    if allowed < causal:
        against = text(lang, "masks.s.against.fewer", diff=f"{causal - allowed:,}", causal=f"{causal:,}")
    elif allowed > causal:
        against = text(lang, "masks.s.against.more", diff=f"{allowed - causal:,}", causal=f"{causal:,}")
    else:
        against = text(lang, "masks.s.against.same", causal=f"{causal:,}")
    per_row = mask.sum(1)
    seen = per_row[per_row > 0]
    empty = int((per_row == 0).sum())
    if not len(seen):
        keys = text(lang, "masks.s.keys.none")
    elif seen.min() == seen.max() == n:
        keys = text(lang, "masks.s.keys.all", n=f"{n:,}")
    elif seen.min() == seen.max():
        keys = text(lang, "masks.s.keys.each", keys=_n(lang, int(seen.min()), "key"))
    else:
        keys = text(lang, "masks.s.keys.range", lo=f"{int(seen.min()):,}", hi=f"{int(seen.max()):,}")
    if empty and len(seen):
        keys = text(lang, f"masks.s.keys.empty.{_one(empty)}", keys=keys, rows=_n(lang, empty, "query_row"))
    return text(lang, "masks.s.mask.other", head=head, against=against, keys=keys)


def _leak(w: np.ndarray, masked: np.ndarray) -> float:
    return float("nan") if np.isnan(w).any() else float(w[masked].sum())


def row_takeaway(row: int, key_to_weights: dict[str, np.ndarray], allowed: np.ndarray, lang: str = "en") -> str:
    """The row-weights chart's title: the weight one query row puts on its masked keys under each way of applying
    the mask (keys of VARIANT_SHORT), most first; or, when the row has no masked key, how far the ways differ."""
    masked = ~allowed.astype(bool)
    m = int(masked.sum())
    names = {k: _short(k, lang) for k in key_to_weights}
    if m == 0:
        ws = list(key_to_weights.values())
        diff = max(float(np.nanmax(np.abs(w - ws[0]))) for w in ws)
        agree = text(lang, "masks.s.row.identical") if diff == 0 else text(lang, "masks.s.row.within", diff=f"{diff:.3g}")
        return text(lang, "masks.s.row.free", row=f"{row:,}", k=f"{len(ws)}", agree=agree)
    leak = {k: _leak(w, masked) for k, w in key_to_weights.items()}
    nan = [names[k] for k, x in leak.items() if np.isnan(x)]
    leaks = sorted((k for k, x in leak.items() if x > 0), key=lambda k: -leak[k])
    none = [names[k] for k, x in leak.items() if x == 0]
    masked_keys = _n(lang, m, "masked_key")
    clauses = []
    if leaks:
        first, *rest = leaks
        clauses.append(text(lang, "masks.s.row.leak_first", name=names[first], share=share(leak[first], lang),
                            masked=masked_keys)
                       + "".join(text(lang, "masks.s.row.leak_rest", name=names[k], share=share(leak[k], lang))
                                 for k in rest))
    if none:
        where = "none_there" if leaks else "none_on"
        clauses.append(text(lang, f"masks.s.row.{where}.{_one(len(none))}", names=join(lang, none), masked=masked_keys))
    if nan:
        clauses.append(text(lang, f"masks.s.row.nan.{_one(len(nan))}", names=join(lang, nan)))
    return text(lang, "masks.s.row.head", row=f"{row:,}", clauses=text(lang, "clause.sep").join(clauses))


def window_takeaway(causal_probs: np.ndarray, window: int, layer: int, head: int, lang: str = "en") -> str:
    """The attention-maps chart's title: the share of the causal map's weight that sits on keys a sliding window
    of `window` removes, over the rows that lose keys, and whether most of it already sat inside the window."""
    n = causal_probs.shape[0]
    where = text(lang, "masks.s.win.where", layer=f"{layer:,}", head=f"{head:,}")
    if window >= n:
        return text(lang, "masks.s.win.all", where=where, w=f"{window:,}", n=f"{n:,}")
    i, j = np.indices((n, n))
    removed = np.where(i - j >= window, causal_probs, 0.0).sum(1)[window:]  # rows window.. lose keys
    mean, worst = float(removed.mean()), int(removed.argmax())
    if mean < 0.5:
        most = text(lang, "masks.s.win.most_inside")
    elif mean > 0.5:
        most = text(lang, "masks.s.win.most_outside")
    else:
        most = text(lang, "masks.s.win.half")
    return text(lang, f"masks.s.win.main.{_one(n - window)}", where=where, rows=_n(lang, n - window, "row"),
                w=f"{window:,}", mean=share(mean, lang), worst=share(float(removed[worst]), lang),
                row=f"{worst + window:,}", most=most)


def window_caption(same: int, n: int, window: int, lang: str = "en") -> str:
    """What the window removes, and at how many positions the model's next-byte guess survives it."""
    if window >= n:
        what = text(lang, "masks.s.cap.all", w=f"{window:,}", tokens=_n(lang, n, "token"))
    elif window == 1:
        what = text(lang, "masks.s.cap.one")
    else:
        what = text(lang, "masks.s.cap.some", back=_n(lang, window - 1, "back"))
    positions = _n(lang, n, "position")
    if same == n:
        guess = text(lang, "masks.s.cap.same", positions=positions)
    elif same == 0:
        guess = text(lang, "masks.s.cap.changed_all", positions=positions)
    else:
        guess = text(lang, "masks.s.cap.changed_some", diff=f"{n - same:,}", positions=positions, same=f"{same:,}")
    return text(lang, "masks.s.cap.main", what=what, guess=guess)


def leak_caption(key_to_mean_leak: dict[str, float], num_masked: int, lang: str = "en") -> str:
    """The leak table's caption: which ways of applying the mask leak, by their mean leaked mass per row."""
    what = text(lang, "masks.s.leak.what")
    if num_masked == 0:
        return text(lang, "masks.s.leak.nothing_masked", what=what)
    names = {k: _short(k, lang) for k in key_to_mean_leak}
    leaks = sorted((k for k, x in key_to_mean_leak.items() if x > 0), key=lambda k: -key_to_mean_leak[k])
    none = [k for k, x in key_to_mean_leak.items() if x == 0]
    said = []
    if leaks:
        items = ", ".join(text(lang, "masks.s.leak.item", name=names[k], share=share(key_to_mean_leak[k], lang))
                          for k in leaks)
        said.append(text(lang, "masks.s.leak.items", items=items))
    if none:
        said.append(text(lang, f"masks.s.leak.none.{_one(len(none))}", names=join(lang, [names[k] for k in none])))
    why = []
    if "times_zero" in leaks:
        why.append(text(lang, "masks.s.leak.why_zero"))
    if {"neg_1e4", "neg_1e9"} & set(none):
        why.append(text(lang, "masks.s.leak.why_finite"))
    why.append(text(lang, "masks.s.leak.why_fp16"))
    return text(lang, "masks.s.leak.main", what=what, said=text(lang, "clause.sep").join(said), why=" ".join(why))




def _verb(lang: str, kind: str, plural: bool = False) -> str:
    return text(lang, f"masks.s.verb.{kind}.{'other' if plural else 'one'}")


def masked_row_caption(rows, lang: str = "en") -> str:
    """The fully-masked-row table's caption, from what was measured (sim.attention.masks.MaskedRow each, as
    fully_masked_row_behaviour returns them)."""
    parts = [text(lang, "masks.s.mrow.pad")]
    where_to_kind = {r.where: r.kind for r in rows}
    plain = where_to_kind.get("softmax_inf")
    if plain is not None:
        parts.append(text(lang, "masks.s.mrow.plain_nan") if plain == "nan"
                     else text(lang, "masks.s.mrow.plain", verb=_verb(lang, plain)))
    big = where_to_kind.get("softmax_1e9")
    if big is not None:
        tail = "masks.s.mrow.big_uniform" if big == "uniform" else "masks.s.mrow.big_end"
        parts.append(text(lang, "masks.s.mrow.big", verb=_verb(lang, big), tail=text(lang, tail)))
    groups: dict[str, list[str]] = {}
    for r in rows:
        if r.sdpa:
            groups.setdefault(r.kind, []).append(r.where)
    if groups:
        said = [text(lang, "masks.s.mrow.sdpa_item", names=join(lang, names), verb=_verb(lang, kind, len(names) > 1))
                for kind, names in groups.items()]
        parts.append(text(lang, "masks.s.mrow.sdpa", said=text(lang, "clause.sep").join(said)))
    return " ".join(parts)


def behaviour_rows(rows, lang: str = "en") -> list[tuple[str, str]]:
    """The fully-masked-row table's (where, result) rows in `lang`, from sim.attention.masks.MaskedRow each; the
    measured numbers (a uniform weight, the first finite values) to three decimals in both languages."""
    out = []
    for r in rows:
        place = text(lang, "masks.s.where.sdpa", name=r.where) if r.sdpa else text(lang, f"masks.s.where.{r.where}")
        if r.kind == "uniform":
            said = text(lang, "masks.s.result.uniform", x=f"{r.values[0]:.3f}")
        elif r.kind == "finite":
            said = text(lang, "masks.s.result.finite", values=", ".join(f"{v:.3f}" for v in r.values))
        else:
            said = text(lang, f"masks.s.result.{r.kind}")
        out.append((place, said))
    return out
