"""The KV memory page's results in words (moved here from sim/cost/kv_readouts.py): the metric row
(`sim.readout.Metric`s), the warnings and captions around the calculator, the formula's steps (worded from the
message values sim.cost.memory returns, catalog area cost_words.json) and tables made safe for Arrow. Names that
came from the user are passed in already escaped (`name_md`); nothing here knows Markdown beyond that. Each
function takes `lang` ("en" or "ko") and words its sentence from the catalogs (keys `kvmem.r.*`, `kvf.*`)."""

from __future__ import annotations

from dataclasses import replace

from sim.cost.arch import GLOBAL, LOCAL, STATE, STATE_NAMES, ArchPreset
from sim.cost.capacity import Capacity, DtypeRow, GpuConfig, int8_vs_fp16
from sim.cost.memory import KvGrid, KvMemory, MemoryConfig, VariantCurves, fmt_bytes, group_label, request_bytes
from sim.cost.vllm_rules import version_label
from sim.readout import Metric
from sim.words import say, text

ARROW_INT_LIMIT = 1 << 62  # past this a Python int column cannot be sent as Arrow int64


def _t(lang: str, key: str, **fields: object) -> str:
    return text(lang, f"kvmem.r.{key}", **fields)


def _n(lang: str, n: int, word: str) -> str:
    """'3 requests', '1 request'; '요청 3개' (a counted word: .one and .other in the catalog)."""
    return _t(lang, f"n.{word}.{'one' if n == 1 else 'other'}", n=f"{n:,}")


# --- the names of what a model's layers keep, in either language --------------------------------


def window_word(arch: ArchPreset, lang: str = "en") -> str:
    """'window' or 'chunk': what a local layer's sliding_window is."""
    return _t(lang, f"word.{arch.window_word}")


def state_name(arch: ArchPreset, lang: str = "en") -> str:
    return _t(lang, f"state.{arch.state_kind}") if arch.state_kind in STATE_NAMES else _t(lang, "state.other")


def group_name(kind: str, arch: ArchPreset, lang: str = "en") -> str:
    """sim.cost.memory.group_label in the page language (English: that function's own words)."""
    if lang == "en":
        return group_label(kind, arch)
    if kind == GLOBAL:
        return _t(lang, "group.mla" if arch.attention == "MLA" else "group.full")
    if kind == LOCAL:
        return _t(lang, f"group.{'chunked' if arch.local_attention == 'chunked' else 'sliding'}",
                  w=f"{arch.sliding_window:,}")
    if kind == STATE:
        return _t(lang, "group.state", name=state_name(arch, lang))
    return _t(lang, "group.indexer")


def layers_described(arch: ArchPreset, lang: str = "en") -> str:
    """ArchPreset.describe_layers in the page language (English: that method's own words)."""
    if lang == "en":
        return arch.describe_layers()
    n_local, n_global, n_state = arch.num_local_layers, arch.num_global_layers, arch.num_state_layers
    w, word = f"{arch.sliding_window:,}", window_word(arch, lang)
    if not n_local and not n_state and n_global == arch.n_layers:
        return _t(lang, "layers.all_full", n=f"{arch.n_layers:,}")
    if n_local == arch.n_layers:
        return _t(lang, "layers.all_local", n=f"{arch.n_layers:,}", w=w, word=word)
    parts = []
    if n_local:
        parts.append(_t(lang, f"layers.part.{'chunked' if arch.local_attention == 'chunked' else 'sliding'}",
                        n=f"{n_local:,}", w=w, word=word))
    if n_global:
        parts.append(_t(lang, "layers.part.full", n=f"{n_global:,}"))
    if n_state:
        parts.append(_t(lang, "layers.part.state", n=f"{n_state:,}", name=state_name(arch, lang)))
    out = _t(lang, "layers.joined", parts=" + ".join(parts))
    if n_local + n_global + n_state < arch.n_layers:
        out += _t(lang, "layers.mlp_only", n=f"{arch.n_layers - n_local - n_global - n_state:,}")
    if arch.kv_shared_layers:
        out += _t(lang, "layers.shared", n=f"{arch.kv_shared_layers:,}")
    if len(arch.layer_pattern) <= 12 and n_local and n_global and not n_state:
        out += _t(lang, "layers.pattern", pattern=arch.layer_pattern)
    return out


def gpu_label(gpu: GpuConfig) -> str:
    """'H100 SXM' for one GPU, '2 × L4' for several."""
    return f"{gpu.num_gpus} × {gpu.gpu.name}" if gpu.num_gpus > 1 else gpu.gpu.name


def kv_metrics(kv: KvMemory, cap: Capacity, gpu: GpuConfig, lang: str = "en") -> list[Metric]:
    """Per token, per request, all requests; the room left for KV; the most requests and the longest context."""
    cfg = kv.config
    windows = (_t(lang, "m.windows", s=f"{cfg.context:,}", avg=fmt_bytes(kv.avg_bytes_per_token))
               if kv.per_request_bytes < kv.bytes_per_token * cfg.context else "")
    budget = cap.kv_budget_bytes
    return [
        Metric(_t(lang, "m.per_token"), fmt_bytes(kv.bytes_per_token),
               help=_t(lang, "m.per_token_help", b=f"{kv.bytes_per_token:,}", windows=windows)),
        Metric(_t(lang, "m.per_request"), fmt_bytes(kv.per_request_bytes), help=f"{kv.per_request_bytes:,} B"),
        Metric(_t(lang, "m.all_requests"), fmt_bytes(kv.total_bytes), help=f"{kv.total_bytes:,} B"),
        Metric(_t(lang, "m.room"), fmt_bytes(budget) if budget > 0 else _t(lang, "m.none"),
               help=_t(lang, "m.room_help", gpu=gpu_label(gpu), total=fmt_bytes(cap.total_bytes),
                       util=f"{gpu.utilization:g}", weights=fmt_bytes(cap.weight_bytes), b=f"{budget:,}")),
        Metric(_t(lang, "m.max_requests"), f"{cap.max_requests:,}", _t(lang, "m.at_s", s=f"{cfg.context:,}"),
               _t(lang, "m.max_requests_help")),
        Metric(_t(lang, "m.max_context"), f"{cap.max_context:,}", _t(lang, "m.at_b", b=f"{cfg.batch:,}"),
               _t(lang, "m.limit_model" if cap.max_context_limited_by == "model" else "m.limit_memory")),
    ]


def beyond_trained_context(cfg: MemoryConfig, name_md: str, lang: str = "en") -> str | None:
    """A warning when the chosen context is past what the model was trained on (None: it is not)."""
    trained = cfg.arch.max_position_embeddings
    if cfg.context <= trained:
        return None
    return _t(lang, "beyond", s=f"{cfg.context:,}", name=name_md, trained=f"{trained:,}")


def replicated_heads_note(arch: ArchPreset, gpu: GpuConfig, lang: str = "en") -> str | None:
    """With more GPUs than K/V heads tensor parallelism copies heads; the count leaves the copies out."""
    if gpu.num_gpus <= arch.n_kv_heads or arch.attention == "MLA":
        return None
    return _t(lang, "replicated", gpus=f"{gpu.num_gpus:,}", heads=f"{arch.n_kv_heads:,}")


def shape_caption(arch: ArchPreset, name_md: str, lang: str = "en") -> str:
    """The architecture under the formula: attention, heads, layers (the source follows it on the page)."""
    return _t(lang, "shape", name=name_md, attention=arch.attention, heads=arch.n_heads, kv=arch.n_kv_heads,
              d=arch.head_dim, layers=layers_described(arch, lang))


def config_read(arch: ArchPreset, name_md: str, lang: str = "en") -> str:
    """What a pasted or uploaded config.json was read as."""
    return _t(lang, "config_read", name=name_md, attention=arch.attention, n=arch.n_layers, kv=arch.n_kv_heads,
              d=arch.head_dim, layers=layers_described(arch, lang))


def dtypes_caption(group_size: int, lang: str = "en") -> str:
    """Under the KV dtypes table: what FP8 and the integer formats carry besides their values."""
    return _t(lang, "dtypes_caption", g=group_size, ratio=f"{int8_vs_fp16(group_size):.4g}")


def arrow_safe(df):
    """Byte counts past 2^62 (absurd configs only) cannot go through Arrow: those columns as text."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object and any(isinstance(v, int) and abs(v) >= ARROW_INT_LIMIT for v in out[col]):
            out[col] = [f"{v:,}" for v in out[col]]
    return out


def columns_in(df, lang: str = "en"):
    """A table's English column names in the page language (catalog `kvmem.col.*`, looked up by the English)."""
    if lang == "en":
        return df
    en_to_key = {text("en", k): k for k in COLUMN_KEYS}
    return df.rename(columns={c: text(lang, en_to_key[c]) for c in df.columns if c in en_to_key})


# every table column the page shows, by its English name (sim.cost.memory's frames and this module's)
COLUMN_KEYS = tuple(f"kvmem.col.{k}" for k in (
    "step", "with_numbers", "group", "layers", "keeps", "per_request_b", "per_request", "share", "vllm_b", "vllm",
    "vllm_ratio", "kv_group", "spec", "slots", "tokens_reserved", "blocks_per_request", "bytes_per_request",
    "attention", "kv_heads", "values_ptpl", "bytes_ptpl", "per_token_all", "model", "query_heads", "head_dim",
    "kv_per_token_b", "params_est", "params_card", "trained_context", "source", "key", "count", "bytes",
    "kv_dtype", "per_token_b", "all_requests_b", "all_requests", "max_requests", "vs_fp16"))


# --- the tabs' chart titles and captions, worded from the results they describe -----------------


def grid_takeaway(grid: KvGrid, cfg: MemoryConfig, kv_budget: int, name: str, lang: str = "en") -> str:
    """The batch × context heatmap's title: up to which batch the chosen context fits in the room left for KV,
    or that nothing / everything the grid shows fits. name: the model's name, already escaped."""
    head = _t(lang, "grid.head", name=name, dtype=cfg.kv_dtype.upper())
    if kv_budget <= 0:
        return _t(lang, "grid.no_room", head=head)
    room = _t(lang, "grid.room", room=fmt_bytes(kv_budget))
    cells = [v for row in grid.total_bytes for v in row]
    if min(cells) > kv_budget:
        return _t(lang, "grid.nothing", head=head, n=_n(lang, grid.batches[0], "request"),
                  s=f"{grid.contexts[0]:,}", need=fmt_bytes(grid.total_bytes[0][0]), room=room)
    if max(cells) <= kv_budget:
        return _t(lang, "grid.everything", head=head, n=_n(lang, grid.batches[-1], "request"),
                  s=f"{grid.contexts[-1]:,}", need=fmt_bytes(grid.total_bytes[-1][-1]), room=room)
    per_request = request_bytes(cfg)
    most = kv_budget // per_request
    if most == 0:
        return _t(lang, "grid.not_one", head=head, s=f"{cfg.context:,}", need=fmt_bytes(per_request), room=room)
    return _t(lang, "grid.fits" if cfg.batch <= most else "grid.not_fits", head=head, s=f"{cfg.context:,}",
              n=_n(lang, most, "request"), room=room, b=f"{cfg.batch:,}", need=fmt_bytes(cfg.batch * per_request))


def grid_caption(grid: KvGrid, cfg: MemoryConfig, kv_budget: int, lang: str = "en") -> str:
    """Under the heatmap: how the cache grows across the grid (windows bend it) and what the orange line marks."""
    arch = cfg.arch
    window = arch.sliding_window if arch.num_local_layers else 0
    if window and grid.contexts[-1] > window:
        after = (_t(lang, "gridcap.after_all") if arch.num_global_layers == 0 else
                 _t(lang, "gridcap.after_global", n=f"{arch.num_global_layers:,}"))
        growth = _t(lang, "gridcap.windowed", w=f"{window:,}", after=after)
    else:
        growth = _t(lang, "gridcap.linear")
    cells = [v for row in grid.total_bytes for v in row]
    if kv_budget <= 0:
        line = _t(lang, "gridcap.no_room")
    elif min(cells) > kv_budget:
        line = _t(lang, "gridcap.none_fit", room=fmt_bytes(kv_budget), need=fmt_bytes(min(cells)))
    elif max(cells) <= kv_budget:
        line = _t(lang, "gridcap.all_fit", room=fmt_bytes(kv_budget), need=fmt_bytes(max(cells)))
    else:
        line = _t(lang, "gridcap.line", room=fmt_bytes(kv_budget))
    return _t(lang, "gridcap.all", growth=growth, line=line)


def _factor(x: float) -> str:
    return f"{x:,.0f}×" if x >= 10 else f"{x:.1f}×"


def variants_takeaway(curves: VariantCurves, cfg: MemoryConfig, name: str, lang: str = "en") -> str:
    """The attention kinds chart's title: which kind needs the smallest cache at the chosen context, and by what
    factor against MHA. name: the model's name, already escaped."""
    kind_to_bytes = {k: cfg.batch * request_bytes(replace(cfg, arch=a)) for k, a in curves.name_to_arch.items()}
    least = min(kind_to_bytes.values())
    smallest = [k for k, v in kind_to_bytes.items() if v == least]
    mha = kind_to_bytes["MHA"]
    head = _t(lang, "var.head", name=name, s=f"{cfg.context:,}", b=f"{cfg.batch:,}")
    if "MHA" in smallest:
        return _t(lang, "var.mha_least", head=head, mha=fmt_bytes(mha))
    who = (_t(lang, "var.one", kind=smallest[0]) if len(smallest) == 1
           else _t(lang, "var.tie", kinds=_t(lang, "var.and").join(smallest)))
    return _t(lang, "var.least", head=head, who=who, least=fmt_bytes(least), mha=fmt_bytes(mha),
              times=_factor(mha / least))


def dtypes_takeaway(rows: tuple[DtypeRow, ...], chosen: str, context: int, lang: str = "en") -> str:
    """The KV dtypes chart's title: how many requests fit at the chosen dtype against the smallest dtype."""
    by_name = {r.kv_dtype: r for r in rows}
    mine = by_name[chosen]
    least = min(rows, key=lambda r: r.per_request_bytes)
    f = dict(s=f"{context:,}", mine=mine.kv_dtype.upper(), least=least.kv_dtype.upper(),
             n=_n(lang, mine.max_requests, "request"), most=f"{least.max_requests:,}")
    if least.max_requests == 0:
        return _t(lang, "dt.none_any", **f)
    if mine.kv_dtype == least.kv_dtype:
        return _t(lang, "dt.is_least", fp16=f"{by_name['fp16'].max_requests:,}", **f)
    if mine.max_requests == 0:
        return _t(lang, "dt.none_mine", **f)
    if mine.max_requests == least.max_requests:
        return _t(lang, "dt.as_many", **f)
    return _t(lang, "dt.fewer", times=_factor(least.max_requests / mine.max_requests), **f)


def mla_note(curves: VariantCurves, arch: ArchPreset, lang: str = "en") -> str:
    """Under the attention kinds chart: the latent sizes its MLA curve was drawn with (arch: the model itself)."""
    mla = curves.name_to_arch.get("MLA")
    if mla is None:
        return _t(lang, "mla.none")
    f = dict(dc=f"{mla.kv_lora_rank:,}", dr=f"{mla.qk_rope_head_dim:,}")
    if arch.attention != "MLA":  # attention_variants made its MLA with sim.cost.arch.with_mla
        return _t(lang, "mla.borrowed", **f)
    return _t(lang, "mla.own", **f)


def windowed_presets_note(presets: dict[str, ArchPreset], lang: str = "en") -> str:
    """The presets with sliding-window layers, from their data: how many layers are local and their window."""
    def one(a: ArchPreset) -> str:
        w = f"{a.sliding_window:,}"
        if a.num_global_layers == 0:
            return _t(lang, "win.every", name=a.name, w=w)
        local, glob = a.layer_pattern.count(LOCAL), a.layer_pattern.count(GLOBAL)
        mix = _t(lang, "win.alternates" if local == glob == 1 else "win.uses", local=local, glob=glob)
        return _t(lang, "win.mix", name=a.name, mix=mix, w=w)

    windowed = [a for a in presets.values() if a.num_local_layers]
    if not windowed:
        return _t(lang, "win.none")
    return _t(lang, "win.among", items="; ".join(one(a) for a in windowed))


# --- layer groups, and what a vLLM-style allocator reserves next to the formula --------------------


def _layer_list(ids: tuple[int, ...], limit: int = 6) -> str:
    """'1, 3, 5, …, 23' for long lists, every id for short ones."""
    if len(ids) <= limit:
        return ", ".join(map(str, ids))
    return ", ".join(map(str, ids[:limit - 1])) + f", …, {ids[-1]}"


def _keeps(g, arch: ArchPreset, lang: str) -> str:
    if g.kind == STATE:
        return _t(lang, "keeps.state", b=fmt_bytes(g.state_bytes_per_layer))
    f = dict(n=f"{g.tokens_kept:,}", b=fmt_bytes(g.bytes_per_token_per_layer))
    if g.kind == LOCAL:
        return _t(lang, "keeps.local", word=window_word(arch, lang), w=f"{arch.sliding_window:,}", **f)
    return _t(lang, "keeps.full", **f)


def _share(part: int, total: int) -> str:
    if total <= 0:
        return "—"
    s = part / total
    return f"{s:.1%}" if 0 < s < 0.999 else f"{s:.0%}"


def group_rows(kv: KvMemory, alloc, lang: str = "en") -> list[dict]:
    """One row per layer group: its layers, what it keeps, its bytes per request by the formula and its share of
    the total, and what the vLLM-style allocator (sim.cost.kv_engine.EngineAllocation) reserves for it. The keys
    are the English column names (app/cli_kv.py reads them); group_frame shows them in the page language."""
    arch = kv.config.arch
    reserved = alloc.kind_bytes()
    rows = []
    for g in kv.groups:
        layers = f"{g.num_layers}: {_layer_list(g.layer_ids)}"
        if g.num_storing_layers != g.num_layers:
            layers += _t(lang, "stores", n=g.num_storing_layers)
        eng = reserved.get(g.kind, 0)
        rows.append({"Group": group_name(g.kind, arch, lang), "Layers": layers, "Keeps": _keeps(g, arch, lang),
                     "Per request (B)": g.bytes_per_request, "Per request": fmt_bytes(g.bytes_per_request),
                     "Share": _share(g.bytes_per_request, kv.per_request_bytes),
                     "vLLM reserves (B)": eng, "vLLM reserves": fmt_bytes(eng),
                     "vLLM ÷ formula": f"{eng / g.bytes_per_request:.3g}×" if g.bytes_per_request else "—"})
    return rows


def _times(x: float) -> str:
    return f"{x:,.0f}×" if x >= 10 else f"{x:.2f}×"


def engine_takeaway(kv: KvMemory, alloc, name: str, lang: str = "en") -> str:
    """The formula-vs-engine chart's title: how much more (or less) the allocator reserves per request than the
    formula counts, and which group makes the difference. name: the model's name, already escaped."""
    cfg, arch = kv.config, kv.config.arch
    f, e = kv.per_request_bytes, alloc.per_request_bytes
    head = _t(lang, "eng.head", name=name, s=f"{cfg.context:,}")
    if e == f:
        return _t(lang, "eng.exact", head=head, f=fmt_bytes(f), vllm=version_label())
    reserved = alloc.kind_bytes()
    gaps = {g.kind: reserved.get(g.kind, 0) - g.bytes_per_request for g in kv.groups}
    kind = max(gaps, key=lambda k: abs(gaps[k]))
    fields = dict(head=head, e=fmt_bytes(e), f=fmt_bytes(f), label=group_name(kind, arch, lang), vllm=version_label())
    if e > f:
        return _t(lang, "eng.more", times=_times(e / f), gap=fmt_bytes(e - f), **fields)
    return _t(lang, "eng.less", gap=fmt_bytes(f - e), **fields)


def engine_metrics(kv: KvMemory, alloc, kv_budget: int, lang: str = "en") -> list[Metric]:
    """Per request and max concurrent requests, counted both ways (the same room for KV)."""
    cfg = kv.config
    budget = max(kv_budget, 0)
    formula_max = budget // kv.per_request_bytes
    engine_max = alloc.max_requests(budget)
    return [
        Metric(_t(lang, "em.formula"), fmt_bytes(kv.per_request_bytes), help=f"{kv.per_request_bytes:,} B"),
        Metric(_t(lang, "em.vllm"), fmt_bytes(alloc.per_request_bytes),
               _t(lang, "em.vllm_delta", x=f"{alloc.per_request_bytes / kv.per_request_bytes:.3g}"),
               _t(lang, "em.vllm_help", vllm=version_label(), blocks=f"{alloc.blocks_per_request:,}", block=f"{alloc.block_bytes:,}",
                  b=f"{alloc.per_request_bytes:,}")),
        Metric(_t(lang, "em.max_formula"), f"{formula_max:,}", _t(lang, "m.at_s", s=f"{cfg.context:,}"),
               help=_t(lang, "em.max_formula_help", room=f"{budget:,}", per=f"{kv.per_request_bytes:,}")),
        Metric(_t(lang, "em.max_vllm"), f"{engine_max:,}",
               _t(lang, "em.concurrency", x=f"{alloc.max_concurrency(budget):.2f}"),
               _t(lang, "em.max_vllm_help", vllm=version_label(), blocks=f"{alloc.num_blocks(budget):,}",
                  per=f"{alloc.blocks_per_request:,}")),
    ]


def engine_caption(kv: KvMemory, alloc, lang: str = "en") -> str:
    """Under the comparison: how the allocator's groups are laid out, worded from them."""
    cfg, arch = kv.config, kv.config.arch
    n = len(alloc.groups)
    if not alloc.hybrid:
        layout = _t(lang, "ecap.one", slots=alloc.groups[0].slots, bs=alloc.block_size, block=f"{alloc.block_bytes:,}",
                    s=f"{cfg.context:,}", blocks=f"{alloc.blocks_per_request:,}")
    else:
        specs = {}
        for g in alloc.groups:
            specs.setdefault(g.spec, []).append(g)
        parts = [_t(lang, "ecap.part", n=len(gs), spec=_t(lang, f"spec.{spec}"), groups=_t(lang, f"ecap.groups.{'one' if len(gs) == 1 else 'other'}"),
                    blocks=_n(lang, gs[0].blocks_per_request, "block")) for spec, gs in specs.items()]
        layout = _t(lang, "ecap.hybrid", n=n, slots=alloc.groups[0].slots, page=f"{alloc.page_bytes:,}",
                    bs=alloc.block_size, block=f"{alloc.block_bytes:,}", parts=" + ".join(parts),
                    blocks=f"{alloc.blocks_per_request:,}")
    local = next((g for g in alloc.groups if g.spec in ("sliding", "chunked")), None)
    extra = ""
    if local is not None:
        extra = _t(lang, "ecap.local", spec=_t(lang, f"spec.{local.spec}"), tokens=f"{local.tokens_reserved:,}",
                   w=f"{arch.sliding_window:,}", word=window_word(arch, lang),
                   batched=f"{alloc.engine.max_num_batched_tokens:,}",
                   mid=_t(lang, "ecap.mid") if local.spec == "sliding" else "")
    return layout + extra + _t(lang, "ecap.end")


def group_frame(kv: KvMemory, alloc, lang: str = "en"):
    """group_rows as a table for the page (byte columns as numbers, with their readable twins)."""
    import pandas as pd

    return columns_in(pd.DataFrame(group_rows(kv, alloc, lang)), lang)


def groups_caption(kv: KvMemory, lang: str = "en") -> str:
    """Under the layer-group table: which group dominates at this context, and what does not grow with it."""
    arch = kv.config.arch
    top = max(kv.groups, key=lambda g: g.bytes_per_request)
    share = top.bytes_per_request / kv.per_request_bytes
    per = fmt_bytes(kv.per_request_bytes)
    s = f"{kv.config.context:,}"
    out = _t(lang, "gcap.top", s=s, label=group_name(top.kind, arch, lang), share=f"{share:.1%}", per=per)
    if len(kv.groups) == 1:
        out = _t(lang, "gcap.one", per=per, s=s)
    fixed = [g for g in kv.groups if g.kind == STATE or (g.kind == LOCAL and g.tokens_kept < kv.config.context)]
    if fixed:
        parts = [_t(lang, "gcap.part", label=group_name(g.kind, arch, lang), b=fmt_bytes(g.bytes_per_request))
                 for g in fixed]
        out += _t(lang, "gcap.fixed", parts=_t(lang, "gcap.or").join(parts))
    return out


def engine_frame(alloc, lang: str = "en"):
    """One row per vLLM KV cache group: its spec, layers, slots, tokens reserved and blocks for one request."""
    import pandas as pd

    rows = []
    for i, g in enumerate(alloc.groups):
        pad = g.slots - len(g.layer_ids)
        rows.append({"KV cache group": i, "Spec": _t(lang, f"spec.{g.spec}"), "Layers": _layer_list(g.layer_ids),
                     "Layer slots": f"{g.slots}" + (_t(lang, "empty", n=pad) if pad else ""),
                     "Tokens reserved": g.tokens_reserved if g.spec != "state" else 0,
                     "Blocks per request": g.blocks_per_request,
                     "Bytes per request": g.blocks_per_request * alloc.block_bytes if alloc.hybrid
                     else alloc.per_request_bytes})
    return columns_in(pd.DataFrame(rows), lang)


def command_caption(kv: KvMemory, alloc, lang: str = "en") -> str:
    """Under the vLLM command: what its numbers are and what vLLM would report for them."""
    cfg = kv.config
    return _t(lang, "command", s=f"{cfg.context:,}", b=f"{cfg.batch:,}", blocks=f"{alloc.blocks_per_request:,}",
              bs=alloc.block_size, e=fmt_bytes(alloc.per_request_bytes), f=fmt_bytes(kv.per_request_bytes))


# --- sim.cost.memory's tables, in the page language ------------------------------------------------

def variant_frame(curves: VariantCurves, cfg: MemoryConfig, lang: str = "en"):
    """sim.cost.memory.variant_rows as a table, in the page language."""
    import pandas as pd

    from sim.cost.memory import variant_rows

    rows = variant_rows(curves, cfg.kv_dtype, cfg.group_size)
    if lang != "en":
        for r in rows:
            r["K/V heads"] = _t(lang, "one_latent") if r["Attention"] == "MLA" else r["K/V heads"]
    return columns_in(pd.DataFrame(rows), lang)


def presets_table(df, presets: dict[str, ArchPreset], lang: str = "en"):
    """sim.cost.memory.presets_frame in the page language: its layer descriptions worded here, columns renamed."""
    if lang == "en":
        return df
    df = df.copy()
    df["Layers"] = [layers_described(presets[k], lang) for k in df["Key"]]
    return columns_in(df, lang)


def measurement_frame(r, lang: str = "en"):
    """sim.cost.memory.measurement_rows (the tiny model's measured cache next to the formulas) as a table."""
    import pandas as pd

    from sim.cost.memory import measurement_rows

    rows = [{**row, "Count": say(lang, row["Count"])} for row in measurement_rows(r)]
    return columns_in(pd.DataFrame(rows), lang)


def measured_caption(r, lang: str = "en") -> str:
    """Where the tiny model's cache was measured (a sim.model.measure.CacheMeasurement)."""
    from sim.cost.memory import ELEMENT_BYTES

    return _t(lang, "meas.caption", device=r.device, dtype=r.dtype.upper(), p=ELEMENT_BYTES[r.dtype],
              shape=r.tensor_shape, weights=r.weights)


def measured_agreement(r, lang: str = "en") -> str:
    """The sentence shown when the counts agree (a sim.model.measure.CacheMeasurement)."""
    return _t(lang, "meas.agree", b=f"{r.measured_bytes:,}", readable=fmt_bytes(r.measured_bytes))


def steps_frame(kv, lang: str = "en"):
    """The formula's steps with this view's numbers (sim.cost.memory.KvMemory.steps) as a two-column table."""
    import pandas as pd

    return pd.DataFrame([{text(lang, "kvmem.col.step"): say(lang, s.what),
                          text(lang, "kvmem.col.with_numbers"): say(lang, s.math)} for s in kv.steps])
