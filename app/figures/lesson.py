"""The lesson's small figures: one per step, each titled with the step's computed claim. Each builder takes
`lang` ("en", "ko") for its labels (sim/words/catalog.py)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.figures import CACHED, FORMULA, NAIVE, base_layout, log_line, si_log_ticks
from app.figures.headline import FULL_WIDTH_CHARS, HALF_WIDTH_CHARS, set_headline
from sim.words import text

ACCENT = "#ff7f0e"
EXTRA = "<extra></extra>"  # no trace name beside a hover label


def _log_axes(fig: go.Figure, x=None, y=None) -> go.Figure:
    """Log axes labelled with whole values at powers of ten (and 2×, 5× over a short span): plotly's own log
    ticks print bare minor digits ("2", "5") that read as values from the back of a room."""
    if x is not None:
        fig.update_xaxes(type="log", **si_log_ticks(x))
    if y is not None:
        fig.update_yaxes(type="log", **si_log_ticks(y))
    return fig


def _titled(fig: go.Figure, title: str, x: str, y: str, height: int = 380, chars: int = FULL_WIDTH_CHARS) -> go.Figure:
    base_layout(fig, "", x, y, height=height)
    return set_headline(fig, title, chars)


def totals_vs_length(lengths: list[int], naive: list[int], cached: list[int], title: str,
                     lang: str = "en", chosen: int | None = None) -> go.Figure:
    """chosen: the N the step's slider picked (one of `lengths`), marked on both curves and by a dotted line."""
    fig = go.Figure()
    fig.add_scatter(x=lengths, y=naive, name=text(lang, "lesson.fig.naive"), mode="lines+markers",
                    line=dict(color=NAIVE))
    fig.add_scatter(x=lengths, y=cached, name=text(lang, "lesson.fig.cached"), mode="lines+markers",
                    line=dict(color=CACHED))
    if chosen is not None:
        i = lengths.index(chosen)
        fig.add_scatter(x=[chosen, chosen], y=[naive[i], cached[i]], mode="markers",
                        name=text(lang, "lesson.fig.chosen", n=f"{chosen:,}"), hoverinfo="skip",
                        marker=dict(size=16, color=ACCENT, symbol="circle-open", line=dict(width=3)))
        log_line(fig, "x", chosen, text(lang, "lesson.fig.chosen", n=f"{chosen:,}"), dict(color=ACCENT, dash="dot"))
    _log_axes(fig, x=lengths, y=naive + cached)
    return _titled(fig, title, text(lang, "lesson.fig.tokens_generated"), text(lang, "lesson.fig.total_flops"))


MASKED = "#8c8c8c"  # cells a causal mask hides: a flat grey, apart from any weight's colour


def who_reads_what(weights: np.ndarray, tokens: list[str], title: str, lang: str = "en") -> go.Figure:
    """(T, T) attention weights: row = the query (used by that step only), column = the key/value read. Cells the
    causal mask hides (a key after its query) are grey, not the colour of a small weight; the weights run on a
    dark-to-bright scale with a titled colour bar, readable from the back of a room."""
    T = weights.shape[0]
    future = np.triu(np.ones((T, T), dtype=bool), k=1)  # (T, T) key after query
    shown = np.where(future, np.nan, weights)
    fig = go.Figure(go.Heatmap(z=shown, x=list(range(T)), y=list(range(T)), colorscale="Viridis", zmin=0,
                               colorbar=dict(title=text(lang, "lesson.fig.weight_bar")),
                               customdata=np.array([tokens] * T),
                               hovertemplate=text(lang, "lesson.fig.reads_hover") + EXTRA))
    fig.add_heatmap(z=np.where(future, 1.0, np.nan), x=list(range(T)), y=list(range(T)), showscale=False,
                    colorscale=[[0, MASKED], [1, MASKED]], hovertemplate=text(lang, "lesson.fig.masked_hover") + EXTRA,
                    name=text(lang, "lesson.fig.masked"))
    fig.add_scatter(x=[None], y=[None], mode="markers", marker=dict(size=12, color=MASKED, symbol="square"),
                    name=text(lang, "lesson.fig.masked"), showlegend=True)  # the grey's meaning, in the legend
    fig.update_yaxes(autorange="reversed")
    return _titled(fig, title, text(lang, "lesson.fig.kv_position"), text(lang, "lesson.fig.query_position"),
                   height=460)


def append_change(with_mask: list[float], without: list[float], title: str, lang: str = "en") -> go.Figure:
    pos = list(range(len(with_mask)))
    fig = go.Figure()
    fig.add_bar(x=pos, y=without, name=text(lang, "lesson.fig.no_mask"), marker_color=NAIVE)
    fig.add_bar(x=pos, y=with_mask, name=text(lang, "lesson.fig.causal_mask"), marker_color=CACHED)
    return _titled(fig, title, text(lang, "lesson.fig.earlier_position"), text(lang, "lesson.fig.logit_change"))


def cache_frame(keys: np.ndarray, values: np.ndarray, q: np.ndarray, weights: np.ndarray, new_rows: range,
                max_rows: int, title: str, lang: str = "en") -> go.Figure:
    """One frame of the filling cache for one layer and head: K and V rows (position × channel) with the
    rows just appended outlined, the new query (used once), and its attention weights over the cache."""
    fig = make_subplots(rows=2, cols=3, column_widths=[0.4, 0.4, 0.2], row_heights=[0.8, 0.2],
                        specs=[[{}, {}, {}], [{"colspan": 2}, None, {}]], horizontal_spacing=0.03,
                        vertical_spacing=0.16,
                        subplot_titles=tuple(text(lang, f"lesson.fig.{k}") for k in ("keys", "values", "new_weights"))
                        + ("", ""))
    D = keys.shape[1]
    pad = np.full((max_rows - keys.shape[0], D), np.nan)
    lim = float(np.nanmax(np.abs(np.concatenate([keys, values])))) or 1.0
    for col, (mat, name) in enumerate(((keys, "K"), (values, "V")), start=1):
        fig.add_heatmap(z=np.vstack([mat, pad]), colorscale="RdBu", zmid=0, zmin=-lim, zmax=lim, showscale=col == 2,
                        colorbar=dict(title=text(lang, "lesson.fig.kv_bar"), len=0.7, y=0.62, x=1.02),
                        hovertemplate=text(lang, "lesson.fig.row_hover", name=name) + EXTRA, row=1, col=col)
        fig.add_shape(type="rect", x0=-0.5, x1=D - 0.5, y0=new_rows.start - 0.5, y1=new_rows.stop - 0.5,
                      line=dict(color=ACCENT, width=3), row=1, col=col)
        fig.update_yaxes(range=[max_rows - 0.5, -0.5], row=1, col=col,
                         **({"title_text": text(lang, "lesson.fig.cache_position")} if col == 1 else
                            {"showticklabels": False}))
        fig.update_xaxes(title_text=text(lang, "lesson.fig.channel"), row=1, col=col)
    fig.add_bar(y=list(range(len(weights))), x=weights, orientation="h", marker_color=CACHED, showlegend=False,
                hovertemplate=text(lang, "lesson.fig.weight_hover") + EXTRA, row=1, col=3)
    fig.update_yaxes(range=[max_rows - 0.5, -0.5], showticklabels=False, row=1, col=3)
    fig.update_xaxes(title_text=text(lang, "lesson.fig.attention_weight"), row=1, col=3)
    fig.add_heatmap(z=q[None, :], colorscale="RdBu", zmid=0, showscale=False,
                    hovertemplate=text(lang, "lesson.fig.q_hover") + EXTRA, row=2, col=1)
    fig.update_xaxes(title_text=text(lang, "lesson.fig.q_channel"), row=2, col=1)
    fig.update_yaxes(showticklabels=False, row=2, col=1)
    fig.add_scatter(x=[0], y=[0], mode="markers", marker=dict(size=1, color=FORMULA), showlegend=False,
                    hoverinfo="skip", row=2, col=3)
    fig.update_xaxes(visible=False, row=2, col=3)
    fig.update_yaxes(visible=False, row=2, col=3)
    base_layout(fig, "", "", "", height=620)
    return set_headline(fig, title, FULL_WIDTH_CHARS, below_px=24)


def bytes_growing(steps: list[int], used: list[int], upto: int, title: str, lang: str = "en") -> go.Figure:
    fig = go.Figure()
    kib = [u / 1024 for u in used]
    fig.add_scatter(x=steps, y=kib, mode="lines", name=text(lang, "lesson.fig.by_the_end"),
                    line=dict(color=FORMULA, dash="dot"))
    fig.add_scatter(x=steps[: upto + 1], y=kib[: upto + 1], mode="lines+markers", name=text(lang, "lesson.fig.so_far"),
                    line=dict(color=CACHED))
    return _titled(fig, title, text(lang, "lesson.fig.decode_step"), text(lang, "lesson.fig.kv_kib"), height=300)


def step_flops_vs_context(contexts: list[int], naive: list[int], cached: list[int], title: str,
                          lang: str = "en", chosen: int | None = None) -> go.Figure:
    return totals_vs_length(contexts, naive, cached, title, lang, chosen).update_layout(
        xaxis_title=text(lang, "lesson.fig.seq_tokens"), yaxis_title=text(lang, "lesson.fig.step_flops"))


def bytes_vs_context(contexts: list[int], per_request: list[int], weights: int, title: str,
                     lang: str = "en") -> go.Figure:
    fig = go.Figure()
    fig.add_scatter(x=contexts, y=[b / 2**30 for b in per_request], name=text(lang, "lesson.fig.request_kv"),
                    mode="lines+markers", line=dict(color=CACHED))
    fig.add_scatter(x=[contexts[0], contexts[-1]], y=[weights / 2**30] * 2, name=text(lang, "lesson.fig.the_weights"),
                    mode="lines", line=dict(color=FORMULA, dash="dash"))
    _log_axes(fig, x=contexts, y=[b / 2**30 for b in per_request] + [weights / 2**30])
    return _titled(fig, title, text(lang, "lesson.fig.context_tokens"), text(lang, "lesson.fig.memory_gib"))


def mini_roofline(peak: float, bandwidth: float, points: list[tuple[str, float, float, str]], title: str,
                  lang: str = "en") -> go.Figure:
    """Attainable FLOP/s vs intensity, with (name, intensity, attainable FLOP/s, colour) points."""
    ridge = peak / bandwidth
    xs = np.logspace(-1, 5, 200)
    fig = go.Figure()
    fig.add_scatter(x=xs, y=np.minimum(peak, xs * bandwidth) / 1e12, mode="lines", name=text(lang, "lesson.fig.roof"),
                    line=dict(color=FORMULA))
    for name, x, y, color in points:
        fig.add_scatter(x=[x], y=[y / 1e12], mode="markers+text", name=name, text=[name], textposition="top center",
                        marker=dict(size=14, color=color))
    log_line(fig, "x", ridge, text(lang, "lesson.fig.ridge", ridge=f"{ridge:,.0f}"), dict(color=FORMULA, dash="dot"))
    _log_axes(fig, x=xs, y=list(np.minimum(peak, xs * bandwidth) / 1e12))
    # headroom above the roof: a point's label sits over it and was cut at the plot's top edge
    fig.update_yaxes(range=[np.log10(xs[0] * bandwidth / 1e12), np.log10(peak / 1e12) + 0.45])
    return _titled(fig, title, text(lang, "lesson.fig.intensity"), text(lang, "lesson.fig.attainable"))


def intensity_vs_batch(batches: list[int], context_to_intensity: dict[int, list[float]], ridge: float,
                       title: str, lang: str = "en", context_to_fit: dict[int, int] | None = None) -> go.Figure:
    """context_to_fit: {context: the largest batch the deployment holds}; a line is solid up to it and dotted past
    it (drawn to show where the intensity heads, not a batch that runs)."""
    fig = go.Figure()
    for color, (S, ys) in zip((CACHED, ACCENT, NAIVE, FORMULA), context_to_intensity.items(), strict=False):
        name = text(lang, "lesson.fig.context_n", n=f"{S:,}")
        top = (context_to_fit or {}).get(S, batches[-1])
        inside = [i for i, b in enumerate(batches) if b <= top]
        fig.add_scatter(x=[batches[i] for i in inside], y=[ys[i] for i in inside], name=name, mode="lines+markers",
                        line=dict(color=color), legendgroup=name)
        past = [i for i, b in enumerate(batches) if b > top]
        if past:
            start = [inside[-1]] if inside else []  # the dotted part joins the solid one
            fig.add_scatter(x=[batches[i] for i in start + past], y=[ys[i] for i in start + past],
                            name=text(lang, "lesson.fig.does_not_fit", n=f"{S:,}"), mode="lines+markers",
                            line=dict(color=color, dash="dot"), marker=dict(symbol="circle-open"), legendgroup=name)
    log_line(fig, "y", ridge, text(lang, "lesson.fig.ridge", ridge=f"{ridge:,.0f}"), dict(color=FORMULA, dash="dot"))
    _log_axes(fig, x=batches, y=[v for ys in context_to_intensity.values() for v in ys] + [ridge])
    return _titled(fig, title, text(lang, "lesson.fig.batch"), text(lang, "lesson.fig.flop_per_byte"))


def bars(labels: list[str], values: list[float], x_axis: str, axis: str, title: str, highlight: str | None = None,
         value_text: list[str] | None = None, half: bool = False) -> go.Figure:
    """half: the chart sits in one of two columns (its title wraps at half the width)."""
    colors = [ACCENT if lab == highlight else CACHED for lab in labels]
    fig = go.Figure(go.Bar(x=labels, y=values, marker_color=colors, text=value_text, textposition="outside",
                           hovertemplate="%{x}: %{y:,.4g}" + EXTRA))
    fig.update_yaxes(range=[0, max(values) * 1.2] if values and max(values) > 0 else None)
    return _titled(fig, title, x_axis, axis, chars=HALF_WIDTH_CHARS if half else FULL_WIDTH_CHARS).update_layout(
        showlegend=False)


def tokens_per_pass(ks: list[int], tokens: list[float], chosen: int, title: str, lang: str = "en") -> go.Figure:
    fig = go.Figure()
    fig.add_scatter(x=ks, y=tokens, mode="lines+markers", name=text(lang, "lesson.fig.tokens_per_pass"),
                    line=dict(color=CACHED))
    fig.add_scatter(x=[chosen], y=[tokens[ks.index(chosen)]], mode="markers", name=text(lang, "lesson.fig.your_k"),
                    marker=dict(size=14, color=ACCENT))
    return _titled(fig, title, text(lang, "lesson.fig.draft_k"), text(lang, "lesson.fig.big_pass"))


POOL_COLORS = ("#e8e8e8", CACHED, ACCENT, "#2ca02c", "#9467bd")  # free, A, B, C, shared by two or more


def _banded(n: int) -> list:
    """A colour scale of n flat bands for the integers 0..n-1 (a heatmap of categories)."""
    scale = []
    for i, c in enumerate(POOL_COLORS[:n]):
        scale += [[i / n, c], [(i + 1) / n, c]]
    return scale


def block_tables(pool, names: tuple[str, ...], marked: tuple[int, ...], title: str, lang: str = "en") -> go.Figure:
    """The pool's blocks in a row (coloured by the request holding them, or shared, or free; each with its id,
    filled slots and ref_cnt) above every request's block table (logical block -> physical id). `marked`: the
    blocks the frame's event touched, outlined."""
    n, bs = pool.num_blocks, pool.block_size
    kind = [0 if pool.ref_cnt[b] == 0 else 4 if pool.ref_cnt[b] > 1 else int(pool.owner[b]) + 1 for b in range(n)]
    cells = [text(lang, "lesson.fig.bt_cell", id=f"{b}", fill=f"{pool.fill[b]}", bs=f"{bs}", ref=f"{pool.ref_cnt[b]}")
             for b in range(n)]
    fig = make_subplots(rows=2, cols=1, row_heights=[0.45, 0.55], vertical_spacing=0.28)
    fig.add_heatmap(z=[kind], x=list(range(n)), text=[cells], texttemplate="%{text}", zmin=-0.5, zmax=4.5,
                    colorscale=_banded(5), showscale=False, xgap=3, hoverinfo="skip", row=1, col=1)
    width = max([len(t) for t in pool.req_to_block_table.values()] + [1])
    rows = [[(names.index(r) + 1 if pool.ref_cnt[t[i]] == 1 else 4) if i < len(t) else None
             for i in range(width)] for r, t in ((nm, pool.req_to_block_table.get(k, ())) for k, nm in enumerate(names))]
    labels = [[f"#{t[i]}" if i < len(t) else "" for i in range(width)]
              for t in (pool.req_to_block_table.get(k, ()) for k in range(len(names)))]
    fig.add_heatmap(z=rows, x=list(range(width)), y=list(names), text=labels, texttemplate="%{text}", zmin=-0.5,
                    zmax=4.5, colorscale=_banded(5), showscale=False, xgap=3, ygap=3, hoverinfo="skip", row=2, col=1)
    for b in marked:
        fig.add_shape(type="rect", x0=b - 0.5, x1=b + 0.5, y0=-0.5, y1=0.5, line=dict(color="#000", width=3),
                      row=1, col=1)
    fig.update_xaxes(title_text=text(lang, "lesson.fig.bt_physical"), dtick=1, row=1, col=1)
    fig.update_yaxes(showticklabels=False, row=1, col=1)
    fig.update_xaxes(title_text=text(lang, "lesson.fig.bt_logical"), dtick=1, row=2, col=1)
    fig.update_yaxes(title_text=text(lang, "lesson.fig.bt_request"), autorange="reversed", row=2, col=1)
    base_layout(fig, "", "", "", height=420)
    return set_headline(fig, title, FULL_WIDTH_CHARS)


def attention_walk(stage: int, walk, tokens: list[str], title: str, lang: str = "en") -> go.Figure:
    """One stage of a token's attention: 0 its query (per channel), 1 its score against each cached key, 2 the
    softmax weights, 3 the output (the weights' mix of the values, per channel)."""
    fig = go.Figure()
    if stage in (0, 3):
        vec = walk.q if stage == 0 else walk.output
        fig.add_bar(x=list(range(len(vec))), y=vec, marker_color=CACHED if stage == 0 else ACCENT,
                    hovertemplate="%{x}: %{y:.3f}" + EXTRA)
        x, y = text(lang, "lesson.fig.walk_channel"), text(lang, f"lesson.fig.walk_y{stage}")
    else:
        vals = walk.scores if stage == 1 else walk.weights
        best = int(np.argmax(vals))
        fig.add_bar(x=list(range(len(vals))), y=vals, customdata=tokens,
                    marker_color=[ACCENT if i == best else CACHED for i in range(len(vals))],
                    hovertemplate="%{x} (%{customdata}): %{y:.3f}" + EXTRA)
        fig.update_xaxes(tickvals=list(range(len(vals))), ticktext=tokens)
        x, y = text(lang, "lesson.fig.walk_position"), text(lang, f"lesson.fig.walk_y{stage}")
    fig.update_layout(showlegend=False)
    return _titled(fig, title, x, y, height=340)
