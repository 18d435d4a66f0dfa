"""Seed 001's KV quantization claims, checked: the bandwidth and memory arithmetic on the 8B model of
its example, and the quality claims against the bits × scheme table measured on the tiny model
(sim/model/quant_errors.py: results_frame)."""

from __future__ import annotations

from dataclasses import dataclass

from sim.claims import Claim, Verdict
from sim.cost.arch import ArchPreset, estimate_num_params
from sim.cost.gpus import GpuPreset
from sim.model.quant_cache import FULL, make_scheme, scheme_bytes

SEED = "001"


@dataclass(frozen=True)
class SeedCheck:
    claims: tuple[Claim, ...]
    unmeasured: tuple[str, ...]  # claims this view has not measured (the table lacks their rows)
    untestable: tuple[str, ...] = ()  # claims this setting cannot test, each with why (no verdict is given)

    def unmeasured_sentence(self) -> str:
        """'' when every claim was checked."""
        if not self.unmeasured:
            return ""
        return (f"Not measured in this view: {'; '.join(self.unmeasured)}. Switch on every scheme at every bit width "
                "(top of the page).")

    def untestable_sentence(self) -> str:
        """'' when this setting can test every claim it measured."""
        return "" if not self.untestable else "Not testable at this setting: " + "; ".join(self.untestable) + "."


def bandwidth_claims(arch: ArchPreset, gpu: GpuPreset, batch: int = 16, context: int = 32768,
                     utilization: float = 0.9) -> tuple[Claim, Claim]:
    """Half the cache is read in half the time, and FP8 / INT8 halve the memory: seed 001's 8B example
    on a GPU preset, at the largest batch (up to `batch`) whose FP16 cache fits."""
    w = estimate_num_params(arch) * 2
    kv16 = scheme_bytes(FULL, context, arch.n_layers, arch.n_kv_heads, arch.head_dim, batch)["total"]
    kv8 = scheme_bytes(make_scheme("fp8_e4m3"), context, arch.n_layers, arch.n_kv_heads, arch.head_dim,
                       batch)["total"]
    bw = gpu.bandwidth_bytes_per_s
    # the example must be one that runs: the largest batch (up to `batch`) whose FP16 cache fits
    usable = int(gpu.memory_bytes * utilization) - w
    fit = min(batch, max(0, usable // max(1, kv16 // batch)))
    note = "" if fit == batch else (
        f" ({batch} requests would need {(w + kv16) / 2**30:,.1f} GiB in FP16, more than the "
        f"{gpu.memory_bytes * utilization / 2**30:,.1f} GiB usable at {utilization:.0%}: the largest batch that fits, "
        f"{fit}, is used)")
    if 0 < fit < batch:
        kv16, kv8 = kv16 * fit // batch, kv8 * fit // batch
    t16, t8 = (w + kv16) / bw, (w + kv8) / bw
    speed = Claim(
        "Decoding is bandwidth-bound: a cache half the size is read in half the time", SEED,
        "half the cache, half the read time",
        f"{arch.name}, {fit} requests × {context:,} tokens on {gpu.name}{note}: reading the cache takes "
        f"{kv16 / bw * 1e3:.1f} ms in FP16 and {kv8 / bw * 1e3:.1f} ms in FP8 — half. But each step also reads "
        f"{w / 2**30:.1f} GiB of weights: {t16 * 1e3:.1f} ms → {t8 * 1e3:.1f} ms, {t16 / t8:.2f}× faster.",
        Verdict.NEEDS_CONTEXT, "Right for the cache; the whole step gains less", "캐시가 절반이 되면 읽는 시간도 절반",
        t16 / t8)
    i8 = make_scheme("kivi", 8, 32, min(32, arch.head_dim), 128)
    b8 = scheme_bytes(i8, context, arch.n_layers, arch.n_kv_heads, arch.head_dim)["total"]
    b16 = kv16 // batch
    memory = Claim(
        "FP8 or INT8 halves the memory", SEED, "half the memory",
        f"FP8 (one per-tensor scale): exactly {kv8 / kv16:.3f} of FP16. INT8 KIVI (an fp16 scale and zero point "
        f"per group of 32 values, R = 128) at {context:,} tokens: {b8 / b16:.3f}.",
        Verdict.NEEDS_CONTEXT, f"Right for FP8; INT8's scales and zero points add {b8 / b16 / 0.5 - 1:.0%} to the half",
        "메모리는 절반이 된다", kv8 / kv16)
    return speed, memory


def seed_claims(table, bits: int, arch: ArchPreset | None = None, gpu: GpuPreset | None = None, batch: int = 16,
                context: int = 32768, utilization: float = 0.9, residual: int | None = None,
                num_tokens: int | None = None) -> SeedCheck:
    """Seed 001's quantization claims against the measured bits × scheme table (results_frame rows)
    and, for the speed and memory claims, the 8B model of its example on a GPU preset. residual and
    num_tokens: the R and the window length the table was measured with (a window R covers holds every
    token in full precision, so it cannot tell recent from old tokens)."""

    def row(kind: str, b: int):
        r = table[(table["scheme"] == kind) & (table["bits"] == b)]
        return None if r.empty else r.iloc[0]

    def dl(r) -> str:
        loss = f"{r['delta_loss']:+.5f}".replace("-0.00000", "+0.00000")
        return f"Δloss {loss}, KL {r['kl']:.1e}, agreement {r['top1_agreement']:.2%}"

    out: list[Claim] = []
    unmeasured: list[str] = []
    untestable: list[str] = []
    if arch is not None and gpu is not None:
        out.extend(bandwidth_claims(arch, gpu, batch, context, utilization))
    r8 = [row("kivi", 8), row("token", 8), row("fp8_e4m3", 8)]
    if all(r is not None for r in r8):
        int_ok = all(r["top1_agreement"] >= 0.99 for r in r8[:2])
        fp8_ok = r8[2]["top1_agreement"] >= 0.99
        verdict, why = {(True, True): (Verdict.RIGHT, "Holds on the tiny model"),
                        (True, False): (Verdict.NEEDS_CONTEXT, "INT8 holds; FP8 e4m3 costs more on the tiny model"),
                        (False, True): (Verdict.NEEDS_CONTEXT, "FP8 holds; INT8 costs more on the tiny model"),
                        (False, False): (Verdict.WRONG, "Not on the tiny model")}[(int_ok, fp8_ok)]
        out.append(Claim(
            "FP8 / INT8: nearly safe, the quality difference is hard to measure", SEED, "nearly safe",
            f"INT8 KIVI: {dl(r8[0])}; INT8 per-token: {dl(r8[1])}; FP8 e4m3: {dl(r8[2])}. FP8 keeps 3 mantissa bits "
            "per value (a step of 1/8 of its power of two) with no group scale; INT8 spreads 255 steps over each "
            "group's own range.", verdict, why, "거의 안전한 구간", float(min(r["top1_agreement"] for r in r8))))
    else:
        unmeasured.append("FP8 / INT8: nearly safe")
    k4, t4 = row("kivi", 4), row("token", 4)
    if k4 is not None and t4 is not None:
        ratio = t4["kl"] / max(k4["kl"], 1e-30)
        out.append(Claim(
            "INT4 works with K per channel, small groups and a residual window; per-token all the way collapses", SEED,
            "usable with KIVI's recipe; per-token collapses",
            f"INT4 KIVI: {dl(k4)}; INT4 K and V per-token: {dl(t4)}.",
            *((Verdict.RIGHT, f"Holds: per-token's KL is {ratio:,.0f}× KIVI's") if ratio > 3 else
              (Verdict.NEEDS_CONTEXT, f"The gap is small on the tiny model: per-token's KL is {ratio:,.2f}× KIVI's")
              if ratio >= 1 else
              (Verdict.WRONG, f"Not on the tiny model: per-token's KL is {ratio:,.2f}× KIVI's, lower")),
            "K를 채널 축으로 … 잔여 창을 두는 조합이면 쓸 만하고, 토큰 축으로 통째로 묶으면 무너진다", float(ratio)))
    else:
        unmeasured.append("INT4 needs the KIVI recipe")
    k2, t2 = row("kivi", 2), row("token", 2)
    if k2 is not None and t2 is not None and k4 is not None:
        out.append(Claim(
            "2-bit is research territory", SEED, "research territory",
            f"INT2 KIVI: {dl(k2)} (KL {k2['kl'] / max(k4['kl'], 1e-30):,.0f}× INT4's); INT2 per-token: {dl(t2)}.",
            *((Verdict.RIGHT, "Holds: a clear cost even with KIVI") if k2["top1_agreement"] < 0.98 else
              (Verdict.NEEDS_CONTEXT, "With KIVI, milder than that on the tiny model; per-token "
                                      + ("collapses" if t2["top1_agreement"] < 0.98 else "holds up too")
                                      + f" ({t2['top1_agreement']:.0%} agreement)")),
            "2비트 — 연구 영역", float(k2["top1_agreement"])))
    else:
        unmeasured.append("2-bit is research territory")
    tb = row("token", bits)
    if tb is not None:
        first, last = tb["kl_first_quarter"], tb["kl_last_quarter"]
        ratio = last / max(first, 1e-30)
        verdict, why = ((Verdict.RIGHT, "Grows with position here") if ratio > 1.5 else
                        (Verdict.CLOSE, "Grows a little with position here") if ratio > 1.1 else
                        (Verdict.NEEDS_CONTEXT, ("Flat per position here" if ratio >= 1 / 1.1 else
                                                 "Falls with position here")
                         + ": with the right text fed in, a late prediction is no worse than an early one; in "
                         "free-running, one changed token and the texts part for good (see above)"))
        out.append(Claim(
            "Errors accumulate: an early token's error is read by every later token, so long outputs degrade late",
            SEED, "errors pile up on later tokens",
            f"INT{bits} per-token, teacher-forced: mean KL {first:.2e} in the first quarter of each window, "
            f"{last:.2e} in the last ({ratio:.2f}×).", verdict, why, "앞선 토큰의 오차가 뒤 토큰에 누적된다",
            float(ratio)))
    tr, tf = row("token_res", bits), row("token_first", bits)
    recent = "Recent tokens stored coarsely hurt more"
    if tr is not None and tf is not None and residual is not None and num_tokens is not None \
            and residual >= num_tokens:
        untestable.append(f"“{recent}”: R={residual} covers all {num_tokens:,} tokens of each window, so both caches "
                          f"keep every token in full precision (KL {tr['kl']:.1e} and {tf['kl']:.1e}); choose R below "
                          f"{num_tokens:,} to test it")
    elif tr is not None and tf is not None and residual == 0:
        untestable.append(f"“{recent}”: with R=0 no token is kept in full precision, recent or old")
    elif tr is not None and tf is not None and tf["kl"] == tr["kl"]:
        untestable.append(f"“{recent}”: quantizing the recent or the old R tokens gave the same KL "
                          f"({tf['kl']:.1e}), so this setting cannot tell them apart")
    elif tr is not None and tf is not None:
        out.append(Claim(
            "Recent tokens stored coarsely hurt more than old tokens stored coarsely", SEED,
            "quantizing recent tokens hurts far more",
            f"INT{bits} per-token with the same bytes: the last R tokens in full precision {dl(tr)}; the first R "
            f"tokens instead {dl(tf)}.",
            *((Verdict.RIGHT, f"Holds: KL {tf['kl'] / max(tr['kl'], 1e-30):,.0f}× higher with the recent tokens "
                              "quantized") if tf["kl"] > tr["kl"] else
              (Verdict.WRONG, f"Not on the tiny model: KL {tr['kl'] / max(tf['kl'], 1e-30):,.1f}× higher with the "
                              "old tokens quantized")),
            "최근 토큰을 거칠게 저장하는 쪽이 훨씬 크게 다친다", float(tf["kl"] / max(tr["kl"], 1e-30))))
    return SeedCheck(tuple(out), tuple(unmeasured), tuple(untestable))
