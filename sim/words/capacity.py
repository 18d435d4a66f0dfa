"""The KV memory page's "Does it fit?" words (moved here from sim/cost/capacity.py): the chart's title, the sentence
under it, and the dtype table's columns, all worded from sim.cost.capacity's numbers."""

from __future__ import annotations

from sim.cost.capacity import Capacity, DtypeRow, GpuConfig
from sim.cost.memory import KvMemory, fmt_bytes
from sim.words import text


def fit_takeaway(cap: Capacity, gpu_label: str, lang: str = "en") -> str:
    """The "Does it fit?" chart's title: weights + KV against the memory usable on gpu_label."""
    usable = text(lang, "kvmem.fit.usable", usable=fmt_bytes(cap.usable_bytes), gpu=gpu_label)
    if cap.kv_budget_bytes <= 0:
        return text(lang, "kvmem.fit.t_no_room", weights=fmt_bytes(cap.weight_bytes), usable=usable)
    need = text(lang, "kvmem.fit.need", weights=fmt_bytes(cap.weight_bytes), kv=fmt_bytes(cap.kv_bytes))
    if cap.fits:
        return text(lang, "kvmem.fit.t_fits", need=need, usable=usable, spare=fmt_bytes(cap.headroom_bytes))
    return text(lang, "kvmem.fit.t_over", need=need, over=fmt_bytes(-cap.headroom_bytes), usable=usable)


def dtype_frame(rows: tuple[DtypeRow, ...], lang: str = "en"):
    """One row per KV dtype; the column names in `lang` (catalog kvmem.col.*)."""
    import pandas as pd

    col = {k: text(lang, f"kvmem.col.{k}") for k in ("kv_dtype", "per_token_b", "per_request_b", "all_requests_b",
                                                    "all_requests", "max_requests", "vs_fp16")}
    return pd.DataFrame([{
        col["kv_dtype"]: r.kv_dtype, col["per_token_b"]: r.bytes_per_token, col["per_request_b"]: r.per_request_bytes,
        col["all_requests_b"]: r.total_bytes, col["all_requests"]: fmt_bytes(r.total_bytes),
        col["max_requests"]: r.max_requests, col["vs_fp16"]: round(r.vs_fp16, 4),
    } for r in rows])


def fit_message(kv: KvMemory, cap: Capacity, gpu: GpuConfig, gpu_label: str, num_params: int,
                lang: str = "en") -> tuple[str, str]:
    """("block" | "fits" | "over", the sentence the page shows), worded from the numbers."""
    params = f"{num_params / 1e9:.3g}"
    if cap.kv_budget_bytes <= 0:
        return "block", text(lang, "kvmem.fit.m_no_room", weights=fmt_bytes(cap.weight_bytes), params=params,
                             dtype=gpu.weight_dtype.upper(), usable=fmt_bytes(cap.usable_bytes), gpu=gpu_label)
    if cap.fits:
        return "fits", text(lang, "kvmem.fit.m_fits", kv=fmt_bytes(kv.total_bytes), weights=fmt_bytes(cap.weight_bytes),
                            params=params, spare=fmt_bytes(cap.headroom_bytes))
    cfg = kv.config
    return "over", text(lang, "kvmem.fit.m_over", kv=fmt_bytes(kv.total_bytes), left=fmt_bytes(cap.kv_budget_bytes),
                        weights=fmt_bytes(cap.weight_bytes), s=f"{cfg.context:,}", n=f"{cap.max_requests:,}",
                        b=f"{cfg.batch:,}", ctx=f"{cap.max_context:,}")
