"""What the KV memory page says with numbers, built from its results: the metric row
(`sim.readout.Metric`s), the warnings and captions around the calculator, and tables made safe for
Arrow. Names that came from the user are passed in already escaped (`name_md`); nothing here knows
Markdown beyond that."""

from __future__ import annotations

from dataclasses import replace

from sim.cost.arch import GLOBAL, LOCAL, STATE, ArchPreset
from sim.cost.capacity import Capacity, DtypeRow, GpuConfig, int8_vs_fp16
from sim.cost.memory import KvGrid, KvMemory, MemoryConfig, VariantCurves, fmt_bytes, group_label, request_bytes
from sim.readout import Metric

ARROW_INT_LIMIT = 1 << 62  # past this a Python int column cannot be sent as Arrow int64


def gpu_label(gpu: GpuConfig) -> str:
    """'H100 SXM' for one GPU, '2 × L4' for several."""
    return f"{gpu.num_gpus} × {gpu.gpu.name}" if gpu.num_gpus > 1 else gpu.gpu.name


def kv_metrics(kv: KvMemory, cap: Capacity, gpu: GpuConfig) -> list[Metric]:
    """Per token, per request, all requests; the room left for KV; the most requests and the longest context."""
    cfg = kv.config
    windows = (f" while the context fits every window; averaged over these {cfg.context:,} tokens it is "
               f"{fmt_bytes(kv.avg_bytes_per_token)}") if kv.per_request_bytes < kv.bytes_per_token * cfg.context else ""
    budget = cap.kv_budget_bytes
    return [
        Metric("Per token", fmt_bytes(kv.bytes_per_token), help=f"{kv.bytes_per_token:,} B, all layers{windows}"),
        Metric("Per request", fmt_bytes(kv.per_request_bytes), help=f"{kv.per_request_bytes:,} B"),
        Metric("All requests", fmt_bytes(kv.total_bytes), help=f"{kv.total_bytes:,} B"),
        Metric("Room for KV", fmt_bytes(budget) if budget > 0 else "none",
               help=f"{gpu_label(gpu)}: {fmt_bytes(cap.total_bytes)} × {gpu.utilization:g} − weights "
                    f"{fmt_bytes(cap.weight_bytes)} = {budget:,} B"),
        Metric("Max requests", f"{cap.max_requests:,}", f"at S = {cfg.context:,}",
               "Concurrent requests whose cache fits at this context"),
        Metric("Max context", f"{cap.max_context:,}", f"at B = {cfg.batch:,}",
               "Limited by the model's trained context" if cap.max_context_limited_by == "model"
               else "Longest context whose cache fits for this batch (limited by memory)"),
    ]


def beyond_trained_context(cfg: MemoryConfig, name_md: str) -> str | None:
    """A warning when the chosen context is past what the model was trained on (None: it is not)."""
    trained = cfg.arch.max_position_embeddings
    if cfg.context <= trained:
        return None
    return (f"{cfg.context:,} tokens is beyond {name_md}'s trained context of {trained:,}: the bytes are still "
            "counted, the model would not cope.")


def replicated_heads_note(arch: ArchPreset, gpu: GpuConfig) -> str | None:
    """With more GPUs than K/V heads tensor parallelism copies heads; the count leaves the copies out."""
    if gpu.num_gpus <= arch.n_kv_heads or arch.attention == "MLA":
        return None
    return (f"With {gpu.num_gpus} GPUs and {arch.n_kv_heads} K/V heads, tensor parallelism would copy some K/V heads "
            "onto several GPUs; those copies are not counted here.")


def shape_caption(arch: ArchPreset, name_md: str) -> str:
    """The architecture under the formula: attention, heads, layers (the source follows it on the page)."""
    return (f"{name_md}: {arch.attention}, {arch.n_heads} query heads, {arch.n_kv_heads} K/V heads of "
            f"{arch.head_dim}, {arch.describe_layers()}.")


def config_read(arch: ArchPreset, name_md: str) -> str:
    """What a pasted or uploaded config.json was read as."""
    return (f"Read {name_md}: {arch.attention}, {arch.n_layers} layers, {arch.n_kv_heads} K/V heads of "
            f"{arch.head_dim}, {arch.describe_layers()}.")


def dtypes_caption(group_size: int) -> str:
    """Under the KV dtypes table: what FP8 and the integer formats carry besides their values."""
    return (f"FP8 here carries one scale per tensor (a few bytes per layer, not counted). The integer formats store "
            f"a 2-byte scale and a 2-byte zero point for every g = {group_size} values, so INT8 is "
            f"{int8_vs_fp16(group_size):.4g}× FP16, not 0.5×. Halving the bytes per value doubles the requests that "
            "fit only when the weights stay the same: they do, the weight dtype is a separate choice.")


def arrow_safe(df):
    """Byte counts past 2^62 (absurd configs only) cannot go through Arrow: those columns as text."""
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object and any(isinstance(v, int) and abs(v) >= ARROW_INT_LIMIT for v in out[col]):
            out[col] = [f"{v:,}" for v in out[col]]
    return out


# --- the tabs' chart titles and captions, worded from the results they describe -----------------


def _requests(n: int) -> str:
    return f"{n:,} request{'s' if n != 1 else ''}"


def grid_takeaway(grid: KvGrid, cfg: MemoryConfig, kv_budget: int, name: str) -> str:
    """The batch × context heatmap's title: up to which batch the chosen context fits in the room left for KV,
    or that nothing / everything the grid shows fits. name: the model's name, already escaped."""
    head = f"{name}, {cfg.kv_dtype.upper()} cache"
    if kv_budget <= 0:
        return f"{head}: the weights leave no room for KV on this GPU, so no batch × context shown fits"
    room = f"the {fmt_bytes(kv_budget)} left for KV"
    cells = [v for row in grid.total_bytes for v in row]
    if min(cells) > kv_budget:
        return (f"{head}: nothing shown fits: even {_requests(grid.batches[0])} of {grid.contexts[0]:,} tokens needs "
                f"{fmt_bytes(grid.total_bytes[0][0])}, more than {room}")
    if max(cells) <= kv_budget:
        return (f"{head}: everything shown fits, up to {_requests(grid.batches[-1])} of {grid.contexts[-1]:,} "
                f"tokens ({fmt_bytes(grid.total_bytes[-1][-1])}) in {room}")
    per_request = request_bytes(cfg)
    most = kv_budget // per_request
    if most == 0:
        return (f"{head}: at {cfg.context:,} tokens not even 1 request fits: it needs {fmt_bytes(per_request)}, "
                f"more than {room}")
    verdict = "fits" if cfg.batch <= most else "does not fit"
    return (f"{head}: at {cfg.context:,} tokens up to {_requests(most)} fit in {room}, so batch {cfg.batch:,} "
            f"({fmt_bytes(cfg.batch * per_request)}) {verdict}")


def grid_caption(grid: KvGrid, cfg: MemoryConfig, kv_budget: int) -> str:
    """Under the heatmap: how the cache grows across the grid (windows bend it) and what the orange line marks."""
    arch = cfg.arch
    window = arch.sliding_window if arch.num_local_layers else 0
    if window and grid.contexts[-1] > window:
        after = ("then stops growing: every layer keeps only its last W tokens" if arch.num_global_layers == 0 else
                 f"then only the {arch.num_global_layers} global layers' share keeps growing")
        growth = (f"The cache is linear in batch; in context it grows linearly up to the window W = {window:,}, "
                  f"{after}.")
    else:
        growth = "The cache is linear in both batch and context: doubling either doubles it."
    cells = [v for row in grid.total_bytes for v in row]
    if kv_budget <= 0:
        line = "No cell fits: the weights alone leave no room for KV, so there is no orange line."
    elif min(cells) > kv_budget:
        line = (f"No cell fits in the {fmt_bytes(kv_budget)} left for KV (the smallest needs "
                f"{fmt_bytes(min(cells))}), so there is no orange line.")
    elif max(cells) <= kv_budget:
        line = (f"Every cell fits in the {fmt_bytes(kv_budget)} left for KV (the largest needs "
                f"{fmt_bytes(max(cells))}), so there is no orange line.")
    else:
        line = (f"Left of and below the orange line the cache fits in the {fmt_bytes(kv_budget)} left next to the "
                "weights.")
    return f"Each cell is batch × context of one model. {growth} {line}"


def variants_takeaway(curves: VariantCurves, cfg: MemoryConfig, name: str) -> str:
    """The attention kinds chart's title: which kind needs the smallest cache at the chosen context, and by what
    factor against MHA. name: the model's name, already escaped."""
    kind_to_bytes = {k: cfg.batch * request_bytes(replace(cfg, arch=a)) for k, a in curves.name_to_arch.items()}
    least = min(kind_to_bytes.values())
    smallest = [k for k, v in kind_to_bytes.items() if v == least]
    mha = kind_to_bytes["MHA"]
    head = f"{name} at {cfg.context:,} tokens, batch {cfg.batch:,}"
    if "MHA" in smallest:
        return f"{head}: no attention kind shrinks the cache below MHA's {fmt_bytes(mha)}"
    who = f"{smallest[0]} needs" if len(smallest) == 1 else " and ".join(smallest) + " tie for"
    factor = mha / least
    times = f"{factor:,.0f}×" if factor >= 10 else f"{factor:.1f}×"
    return f"{head}: {who} the smallest cache, {fmt_bytes(least)}; MHA's {fmt_bytes(mha)} is {times} as much"


def dtypes_takeaway(rows: tuple[DtypeRow, ...], chosen: str, context: int) -> str:
    """The KV dtypes chart's title: how many requests fit at the chosen dtype against the smallest dtype."""
    by_name = {r.kv_dtype: r for r in rows}
    mine = by_name[chosen]
    least = min(rows, key=lambda r: r.per_request_bytes)
    at = f"at {context:,} tokens"
    if least.max_requests == 0:
        return f"Not one request of {context:,} tokens fits with any KV dtype, not even {least.kv_dtype.upper()}"
    if mine.kv_dtype == least.kv_dtype:
        fp16 = by_name["fp16"]
        return (f"{mine.kv_dtype.upper()}, the smallest KV dtype, fits {_requests(mine.max_requests)} {at}, "
                f"vs {fp16.max_requests:,} with FP16")
    if mine.max_requests == 0:
        return (f"No request of {context:,} tokens fits with {mine.kv_dtype.upper()}; the smallest KV dtype, "
                f"{least.kv_dtype.upper()}, fits {least.max_requests:,}")
    if mine.max_requests == least.max_requests:
        return (f"{mine.kv_dtype.upper()} fits {_requests(mine.max_requests)} {at}, as many as the smallest KV "
                f"dtype, {least.kv_dtype.upper()}")
    factor = least.max_requests / mine.max_requests
    times = f"{factor:,.0f}×" if factor >= 10 else f"{factor:.1f}×"
    return (f"{mine.kv_dtype.upper()} fits {_requests(mine.max_requests)} {at}; the smallest KV dtype, "
            f"{least.kv_dtype.upper()}, fits {least.max_requests:,} ({times} as many)")


def mla_note(curves: VariantCurves, arch: ArchPreset) -> str:
    """Under the attention kinds chart: the latent sizes its MLA curve was drawn with (arch: the model itself)."""
    mla = curves.name_to_arch.get("MLA")
    if mla is None:
        return "MLA is left out for this model: a latent of 4·d_h would be out of the preset bounds."
    if arch.attention != "MLA":  # attention_variants made its MLA with sim.cost.arch.with_mla
        return (f"This model is not MLA, so it is shown here with DeepSeek-V2's ratios: d_c = 4·d_h = "
                f"{mla.kv_lora_rank:,}, d_R = d_h/2 = {mla.qk_rope_head_dim:,}.")
    return f"This model is MLA itself, with its own d_c = {mla.kv_lora_rank:,} and d_R = {mla.qk_rope_head_dim:,}."


def windowed_presets_note(presets: dict[str, ArchPreset]) -> str:
    """The presets with sliding-window layers, from their data: how many layers are local and their window."""
    def one(a: ArchPreset) -> str:
        if a.num_global_layers == 0:
            return f"{a.name}: every layer, W = {a.sliding_window:,}"
        local, glob = a.layer_pattern.count(LOCAL), a.layer_pattern.count(GLOBAL)
        mix = (f"alternates {local}:{glob}" if local == glob == 1 else f"uses {local} local to {glob} global")
        return f"{a.name} {mix} (W = {a.sliding_window:,})"

    windowed = [a for a in presets.values() if a.num_local_layers]
    if not windowed:
        return "No preset here has sliding-window layers."
    return "Among the presets: " + "; ".join(one(a) for a in windowed) + "."


# --- layer groups, and what a vLLM-style allocator reserves next to the formula --------------------


def _layer_list(ids: tuple[int, ...], limit: int = 6) -> str:
    """'1, 3, 5, …, 23' for long lists, every id for short ones."""
    if len(ids) <= limit:
        return ", ".join(map(str, ids))
    return ", ".join(map(str, ids[:limit - 1])) + f", …, {ids[-1]}"


def _keeps(g, arch: ArchPreset) -> str:
    if g.kind == STATE:
        return f"{fmt_bytes(g.state_bytes_per_layer)} of state per layer, whatever the context"
    if g.kind == LOCAL:
        return f"{g.tokens_kept:,} tokens (≤ {arch.window_word} {arch.sliding_window:,}) × {fmt_bytes(g.bytes_per_token_per_layer)}"
    return f"{g.tokens_kept:,} tokens × {fmt_bytes(g.bytes_per_token_per_layer)}"


def _share(part: int, total: int) -> str:
    if total <= 0:
        return "—"
    s = part / total
    return f"{s:.1%}" if 0 < s < 0.999 else f"{s:.0%}"


def group_rows(kv: KvMemory, alloc) -> list[dict]:
    """One row per layer group: its layers, what it keeps, its bytes per request by the formula and its share of
    the total, and what the vLLM-style allocator (sim.cost.kv_engine.EngineAllocation) reserves for it."""
    arch = kv.config.arch
    reserved = alloc.kind_bytes()
    rows = []
    for g in kv.groups:
        layers = f"{g.num_layers}: {_layer_list(g.layer_ids)}"
        if g.num_storing_layers != g.num_layers:
            layers += f" ({g.num_storing_layers} store)"
        eng = reserved.get(g.kind, 0)
        rows.append({"Group": group_label(g.kind, arch), "Layers": layers, "Keeps": _keeps(g, arch),
                     "Per request (B)": g.bytes_per_request, "Per request": fmt_bytes(g.bytes_per_request),
                     "Share": _share(g.bytes_per_request, kv.per_request_bytes),
                     "vLLM reserves (B)": eng, "vLLM reserves": fmt_bytes(eng),
                     "vLLM ÷ formula": f"{eng / g.bytes_per_request:.3g}×" if g.bytes_per_request else "—"})
    return rows


def _times(x: float) -> str:
    return f"{x:,.0f}×" if x >= 10 else f"{x:.2f}×"


def engine_takeaway(kv: KvMemory, alloc, name: str) -> str:
    """The formula-vs-engine chart's title: how much more (or less) the allocator reserves per request than the
    formula counts, and which group makes the difference. name: the model's name, already escaped."""
    cfg, arch = kv.config, kv.config.arch
    f, e = kv.per_request_bytes, alloc.per_request_bytes
    head = f"{name} at {cfg.context:,} tokens"
    if e == f:
        return f"{head}: vLLM's blocks reserve exactly the formula's {fmt_bytes(f)} per request"
    reserved = alloc.kind_bytes()
    gaps = {g.kind: reserved.get(g.kind, 0) - g.bytes_per_request for g in kv.groups}
    kind = max(gaps, key=lambda k: abs(gaps[k]))
    label = group_label(kind, arch)
    if e > f:
        return (f"{head}: vLLM reserves {fmt_bytes(e)} per request, {_times(e / f)} the formula's {fmt_bytes(f)}; "
                f"the {label} layers take most of the {fmt_bytes(e - f)} extra")
    return (f"{head}: vLLM reserves {fmt_bytes(e)} per request, less than the formula's {fmt_bytes(f)}; "
            f"the {label} layers make most of the {fmt_bytes(f - e)} difference")


def engine_metrics(kv: KvMemory, alloc, kv_budget: int) -> list[Metric]:
    """Per request and max concurrent requests, counted both ways (the same room for KV)."""
    cfg = kv.config
    budget = max(kv_budget, 0)
    formula_max = budget // kv.per_request_bytes
    engine_max = alloc.max_requests(budget)
    return [
        Metric("Formula, per request", fmt_bytes(kv.per_request_bytes), help=f"{kv.per_request_bytes:,} B"),
        Metric("vLLM reserves, per request", fmt_bytes(alloc.per_request_bytes),
               f"{alloc.per_request_bytes / kv.per_request_bytes:.3g}× the formula",
               f"{alloc.blocks_per_request:,} blocks × {alloc.block_bytes:,} B = {alloc.per_request_bytes:,} B"),
        Metric("Max requests (formula)", f"{formula_max:,}", f"at S = {cfg.context:,}",
               help=f"{budget:,} B of room ÷ {kv.per_request_bytes:,} B per request"),
        Metric("Max requests (vLLM blocks)", f"{engine_max:,}", f"{alloc.max_concurrency(budget):.2f}× concurrency",
               f"{alloc.num_blocks(budget):,} blocks ÷ {alloc.blocks_per_request:,} per request"),
    ]


def engine_caption(kv: KvMemory, alloc) -> str:
    """Under the comparison: how the allocator's groups are laid out, worded from them."""
    cfg, arch = kv.config, kv.config.arch
    n = len(alloc.groups)
    if not alloc.hybrid:
        layout = (f"One KV cache group of {alloc.groups[0].slots} layers: a block holds {alloc.block_size} tokens of "
                  f"every layer and costs {alloc.block_bytes:,} B; a request of {cfg.context:,} tokens needs "
                  f"{alloc.blocks_per_request:,} of them.")
    else:
        specs = {}
        for g in alloc.groups:
            specs.setdefault(g.spec, []).append(g)
        parts = [f"{len(gs)} {spec} group{'s' if len(gs) != 1 else ''} × {gs[0].blocks_per_request:,} block"
                 f"{'s' if gs[0].blocks_per_request != 1 else ''}" for spec, gs in specs.items()]
        layout = (f"{n} KV cache groups of {alloc.groups[0].slots} layer slots, one page size ({alloc.page_bytes:,} B "
                  f"per layer, {alloc.block_size} tokens of attention): a block id costs {alloc.block_bytes:,} B; a "
                  f"request needs {' + '.join(parts)} = {alloc.blocks_per_request:,} blocks.")
    local = next((g for g in alloc.groups if g.spec in ("sliding", "chunked")), None)
    extra = ""
    if local is not None:
        extra = (f" A {local.spec} layer reserves {local.tokens_reserved:,} tokens, not {arch.sliding_window:,}: the "
                 f"{arch.window_word} plus the {alloc.engine.max_num_batched_tokens:,} tokens one step may schedule "
                 f"(--max-num-batched-tokens){', plus one block for a window that starts mid-block' if local.spec == 'sliding' else ''}.")
    return layout + extra + " Both ways leave activations and CUDA graphs out."


def group_frame(kv: KvMemory, alloc):
    """group_rows as a table for the page (byte columns as numbers, with their readable twins)."""
    import pandas as pd

    return pd.DataFrame(group_rows(kv, alloc))


def groups_caption(kv: KvMemory) -> str:
    """Under the layer-group table: which group dominates at this context, and what does not grow with it."""
    arch = kv.config.arch
    top = max(kv.groups, key=lambda g: g.bytes_per_request)
    share = top.bytes_per_request / kv.per_request_bytes
    text = (f"At {kv.config.context:,} tokens the {group_label(top.kind, arch)} layers hold {share:.1%} of the "
            f"{fmt_bytes(kv.per_request_bytes)} per request.")
    if len(kv.groups) == 1:
        text = f"Every layer keeps the same thing: {fmt_bytes(kv.per_request_bytes)} per request at {kv.config.context:,} tokens."
    fixed = [g for g in kv.groups if g.kind == STATE or (g.kind == LOCAL and g.tokens_kept < kv.config.context)]
    if fixed:
        parts = [f"the {group_label(g.kind, arch)} layers' {fmt_bytes(g.bytes_per_request)}" for g in fixed]
        text += f" Longer contexts add nothing to {' or '.join(parts)}: only the full-context layers keep growing."
    return text


def engine_frame(alloc):
    """One row per vLLM KV cache group: its spec, layers, slots, tokens reserved and blocks for one request."""
    import pandas as pd

    rows = []
    for i, g in enumerate(alloc.groups):
        pad = g.slots - len(g.layer_ids)
        rows.append({"KV cache group": i, "Spec": g.spec, "Layers": _layer_list(g.layer_ids),
                     "Layer slots": f"{g.slots}" + (f" ({pad} empty)" if pad else ""),
                     "Tokens reserved": g.tokens_reserved if g.spec != "state" else 0,
                     "Blocks per request": g.blocks_per_request,
                     "Bytes per request": g.blocks_per_request * alloc.block_bytes if alloc.hybrid
                     else alloc.per_request_bytes})
    return pd.DataFrame(rows)


def command_caption(kv: KvMemory, alloc) -> str:
    """Under the vLLM command: what its numbers are and what vLLM would report for them."""
    cfg = kv.config
    return (f"--max-model-len is the context S = {cfg.context:,} and --max-num-seqs the batch B = {cfg.batch:,}; "
            f"with these settings each request needs {alloc.blocks_per_request:,} blocks of {alloc.block_size} "
            f"tokens ({fmt_bytes(alloc.per_request_bytes)}) against the formula's {fmt_bytes(kv.per_request_bytes)}.")
