"""Seed 002's claims about attention kernels, as `sim.claims.Claim`s. Where this page has run its
sweep, the FlashAttention memory and speed claims carry this machine's measured ratios; no number
measured elsewhere is quoted as this machine's."""

from __future__ import annotations

from sim.attention.timing import SweepResult
from sim.claims import Claim, Verdict


def _measured(sweep: SweepResult | None, stat: str) -> tuple[str, str, float | None, float | None]:
    """(time sentence, memory sentence, time ratio, memory ratio) from the sweep's largest N, or blanks."""
    got = sweep.flash_vs_eager(stat) if sweep is not None else None
    if got is None:
        return "", "", None, None
    where = f"at N = {got.num_keys:,} on {sweep.results[-1].device}"
    r, m = got.time_ratio, got.memory_ratio
    speed = (f"FLASH is {r:,.1f}× faster than eager" if f"{r:,.1f}" != "1.0" and r > 1 else
             f"FLASH is {1 / r:,.1f}× slower than eager" if f"{1 / r:,.1f}" != "1.0" and r < 1 else
             "FLASH and eager take about as long")
    time_text = f" Measured on this page {where}: {speed} ({stat})."
    if m is None:
        mem_text = ""
    elif m >= 1:
        mem_text = f" Measured on this page {where}: eager's peak memory is {m:,.0f}× FLASH's."
    else:
        mem_text = f" Measured on this page {where}: FLASH's peak memory is {1 / m:,.1f}× eager's."
    return time_text, mem_text, got.time_ratio, got.memory_ratio


def kernel_claims(sweep: SweepResult | None = None, stat: str = "median") -> tuple[Claim, ...]:
    time_text, mem_text, time_ratio, mem_ratio = _measured(sweep, stat)
    return (
        Claim("Standard attention: S = QKᵀ, P = softmax(S), O = PV, three round trips to HBM", "002",
              "three round trips to HBM", "four N_q×N_k passes (write S, read S, write P, read P) in the traffic "
              "model", Verdict.RIGHT,
              "Right for an unfused kernel (eager here, SDPA-MATH): S and P are N×N tensors written out and read back."),
        Claim("FlashAttention: memory O(N²) → O(N)", "002", "O(N²) → O(N)",
              "O + one fp32 statistic per query row beyond Q, K, V" + mem_text, Verdict.RIGHT,
              "Right for the extra memory: beyond Q, K, V, O it keeps a max and a sum (or their log-sum-exp) per row.",
              value=mem_ratio),
        Claim("One HBM round trip per tile", "002", "one round trip per tile",
              "K and V read once per Q tile, ⌈N/B_r⌉ times in all (the traffic model above)", Verdict.NEEDS_CONTEXT,
              "Needs context: K and V are read once per Q tile, ⌈N/B_r⌉ times in all (the traffic model above)."),
        Claim("Exact, not an approximation; bit-for-bit identical (fp16 non-associativity aside)", "002",
              "exact; bit-for-bit identical", "exact in real arithmetic; about 1e-7 apart in float32 (the stepper)",
              Verdict.NEEDS_CONTEXT,
              "Exact in real arithmetic, yes; bit-for-bit, no, in any float format: the stepper shows ≈1e-7 in float32."),
        Claim("FlashAttention: 24× wall-clock on A100, 510× on H100 in FP8", "002", "24× (A100), 510× (H100, FP8)",
              "published kernel speedups are single digits" + time_text, Verdict.WRONG,
              "Neither figure is in the FlashAttention papers (24× may be a garbled 2.4×, FA1's speedup on Long-Range "
              "Arena). Published: FA1 up to 7.6× on GPT-2's attention, 3× end-to-end GPT-2 training; FA2 about 2× FA1, "
              "50–73 % of A100 peak FLOP/s; FA3 1.5–2× FA2 on H100, up to 740 TFLOP/s in fp16 (75 % of peak), close to "
              "1.2 PFLOP/s in FP8. Kernel speedups are single digits, not hundreds.", value=time_ratio),
        Claim("HBM ≈ 3 TB/s, SRAM ≈ 30 TB/s on H100: HBM ≈ 10× slower", "002", "3 vs 30 TB/s: 10×",
              "H100 SXM HBM3: 3.35 TB/s; the FA1 paper: 1.5–2.0 vs 19 TB/s on A100", Verdict.CLOSE,
              "The right order of magnitude (H100 SXM HBM3: 3.35 TB/s; the FA1 paper quotes 1.5–2.0 vs 19 TB/s on A100)."),
    )
