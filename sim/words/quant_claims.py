"""Seed 001's KV quantization claims, checked and worded (moved here from sim/model/quant_claims.py): the
bandwidth and memory arithmetic on the 8B model of its example, and the quality claims against the bits × scheme
table measured on the tiny model (sim.words.quant.results_frame), in either language (catalog area
kv_quantization.json). The thresholds and the seed's own words stay in sim/model/quant_claims.py."""

from __future__ import annotations

from dataclasses import dataclass

from sim.claims import Claim, Verdict
from sim.cost.arch import ArchPreset, estimate_num_params
from sim.cost.gpus import GpuPreset
from sim.model.quant_cache import FULL, make_scheme, scheme_bytes
from sim.model.quant_claims import KL_GAP, ORIGINAL, SAFE_AGREEMENT, SEED, fp8_verdict
from sim.readout import times
from sim.words import text


def _claim(name: str, lang: str, computed: str, verdict: Verdict, why: str, value: float) -> Claim:
    """A seed claim: its statement in English (the claims table shows it beside the seed's Korean), what the
    seed claims and what the lab computed in `lang`."""
    return Claim(text("en", f"quant.claim.{name}.statement"), SEED, text(lang, f"quant.claim.{name}.claimed"),
                 computed, verdict, why, ORIGINAL[name], value)


@dataclass(frozen=True)
class SeedCheck:
    claims: tuple[Claim, ...]
    unmeasured: tuple[str, ...]  # claims this view has not measured (the table lacks their rows)
    untestable: tuple[str, ...] = ()  # claims this setting cannot test, each with why (no verdict is given)
    lang: str = "en"  # the language of its sentences

    def unmeasured_sentence(self) -> str:
        """'' when every claim was checked."""
        if not self.unmeasured:
            return ""
        return text(self.lang, "quant.claim.unmeasured", what="; ".join(self.unmeasured))

    def untestable_sentence(self) -> str:
        """'' when this setting can test every claim it measured."""
        return "" if not self.untestable else text(self.lang, "quant.claim.untestable", what="; ".join(self.untestable))


def bandwidth_claims(arch: ArchPreset, gpu: GpuPreset, batch: int = 16, context: int = 32768,
                     utilization: float = 0.9, lang: str = "en") -> tuple[Claim, Claim]:
    """Half the cache is read in half the time, and FP8 / INT8 halve the memory: seed 001's 8B example
    on a GPU preset, at the largest batch (up to `batch`) whose FP16 cache fits."""
    w = estimate_num_params(arch) * 2
    b16 = scheme_bytes(FULL, num_tokens=context, n_layers=arch.n_layers, n_kv_heads=arch.n_kv_heads, head_dim=arch.head_dim)["total"]  # one request
    kv16 = b16 * batch
    kv8 = scheme_bytes(make_scheme("fp8_e4m3"), num_tokens=context, n_layers=arch.n_layers, n_kv_heads=arch.n_kv_heads, head_dim=arch.head_dim,
                       batch=batch)["total"]
    bw = gpu.bandwidth_bytes_per_s
    # the example must be one that runs: the largest batch (up to `batch`) whose FP16 cache fits
    usable = int(gpu.memory_bytes * utilization) - w
    fit = min(batch, max(0, usable // max(1, kv16 // batch)))
    note = "" if fit == batch else text(
        lang, "quant.claim.speed.note", batch=f"{batch}", need=f"{(w + kv16) / 2**30:,.1f}",
        usable=f"{gpu.memory_bytes * utilization / 2**30:,.1f}", util=f"{utilization:.0%}", fit=f"{fit}")
    if 0 < fit < batch:
        kv16, kv8 = kv16 * fit // batch, kv8 * fit // batch
    t16, t8 = (w + kv16) / bw, (w + kv8) / bw
    speed = _claim("speed", lang, text(
        lang, "quant.claim.speed.computed", model=arch.name, fit=f"{fit}", ctx=f"{context:,}", gpu=gpu.name,
        note=note, r16=f"{kv16 / bw * 1e3:.1f}", r8=f"{kv8 / bw * 1e3:.1f}", w=f"{w / 2**30:.1f}",
        t16=f"{t16 * 1e3:.1f}", t8=f"{t8 * 1e3:.1f}", x=f"{t16 / t8:.2f}"),
        Verdict.NEEDS_CONTEXT, text(lang, "quant.claim.speed.why"), t16 / t8)
    i8 = make_scheme("kivi", bits=8, chunk=32, channel_group=min(32, arch.head_dim), residual=128)
    # per request, both of them: the FP16 total above may have been cut to the requests that fit
    b8 = scheme_bytes(i8, num_tokens=context, n_layers=arch.n_layers, n_kv_heads=arch.n_kv_heads, head_dim=arch.head_dim)["total"]
    memory = _claim("memory", lang, text(lang, "quant.claim.memory.computed", fp8=f"{kv8 / kv16:.3f}",
                                         ctx=f"{context:,}", int8=f"{b8 / b16:.3f}"),
                    Verdict.NEEDS_CONTEXT, text(lang, "quant.claim.memory.why", extra=f"{b8 / b16 / 0.5 - 1:.1%}"),
                    kv8 / kv16)
    return speed, memory


def seed_claims(table, bits: int, arch: ArchPreset | None = None, gpu: GpuPreset | None = None, batch: int = 16,
                context: int = 32768, utilization: float = 0.9, residual: int | None = None,
                num_tokens: int | None = None, lang: str = "en") -> SeedCheck:
    """Seed 001's quantization claims against the measured bits × scheme table (results_frame rows)
    and, for the speed and memory claims, the 8B model of its example on a GPU preset. residual and
    num_tokens: the R and the window length the table was measured with (a window R covers holds every
    token in full precision, so it cannot tell recent from old tokens). Claimed, computed and why are
    worded in `lang`."""

    def row(kind: str, b: int):
        r = table[(table["scheme"] == kind) & (table["bits"] == b)]
        return None if r.empty else r.iloc[0]

    def dl(r) -> str:
        loss = f"{r['delta_loss']:+.5f}".replace("-0.00000", "+0.00000")
        return text(lang, "quant.claim.dl", loss=loss, kl=f"{r['kl']:.1e}", agree=f"{r['top1_agreement']:.2%}")

    def say(key: str, **fields: object) -> str:
        return text(lang, f"quant.claim.{key}", **fields)

    out: list[Claim] = []
    unmeasured: list[str] = []
    untestable: list[str] = []
    if arch is not None and gpu is not None:
        out.extend(bandwidth_claims(arch, gpu, batch, context, utilization, lang))
    k8, t8, f8, k4 = row("kivi", 8), row("token", 8), row("fp8_e4m3", 8), row("kivi", 4)
    if k8 is not None and t8 is not None:
        ok = [r["top1_agreement"] >= SAFE_AGREEMENT for r in (k8, t8)]
        verdict, why = {(True, True): (Verdict.RIGHT, "holds"), (True, False): (Verdict.NEEDS_CONTEXT, "kivi_only"),
                        (False, True): (Verdict.NEEDS_CONTEXT, "token_only"),
                        (False, False): (Verdict.WRONG, "neither")}[tuple(ok)]
        out.append(_claim("int8", lang, say("int8.computed", kivi=dl(k8), token=dl(t8)), verdict,
                          say(f"int8.why.{why}", agree=f"{SAFE_AGREEMENT:.0%}"),
                          float(min(r["top1_agreement"] for r in (k8, t8)))))
    else:
        unmeasured.append(say("int8.short"))
    if f8 is not None and t8 is not None:
        verdict, why = fp8_verdict(f8, t8)
        x4 = "" if k4 is None or k4["kl"] <= 0 else say("fp8.vs_kivi4", y=times(f8["kl"] / k4["kl"])[:-1])
        out.append(_claim("fp8", lang, say("fp8.computed", fp8=dl(f8), token=dl(t8)), verdict,
                          say(f"fp8.why.{why}", x=times(f8["kl"] / max(t8["kl"], 1e-30))[:-1], vs_kivi4=x4,
                              agree=f"{f8['top1_agreement']:.2%}", need=f"{SAFE_AGREEMENT:.0%}", gap=f"{KL_GAP:g}"),
                          float(f8["kl"] / max(t8["kl"], 1e-30))))
    else:
        unmeasured.append(say("fp8.short"))
    k4, t4 = row("kivi", 4), row("token", 4)
    if k4 is not None and t4 is not None:
        ratio = t4["kl"] / max(k4["kl"], 1e-30)
        verdict, why = ((Verdict.RIGHT, say("int4.why.holds", x=f"{ratio:,.0f}")) if ratio > 3 else
                        (Verdict.NEEDS_CONTEXT, say("int4.why.small", x=f"{ratio:,.2f}")) if ratio >= 1 else
                        (Verdict.WRONG, say("int4.why.not", x=f"{ratio:,.2f}")))
        out.append(_claim("int4", lang, say("int4.computed", kivi=dl(k4), token=dl(t4)), verdict, why, float(ratio)))
    else:
        unmeasured.append(say("int4.short"))
    k2, t2 = row("kivi", 2), row("token", 2)
    if k2 is not None and t2 is not None and k4 is not None:
        if k2["top1_agreement"] < 0.98:
            verdict, why = Verdict.RIGHT, say("int2.why.holds")
        else:
            verdict = Verdict.NEEDS_CONTEXT
            why = say("int2.why.milder", naive=say("int2.collapses" if t2["top1_agreement"] < 0.98 else "int2.holds_up"),
                      agree=f"{t2['top1_agreement']:.0%}")
        out.append(_claim("int2", lang, say("int2.computed", kivi=dl(k2), x=f"{k2['kl'] / max(k4['kl'], 1e-30):,.0f}",
                                            token=dl(t2)), verdict, why, float(k2["top1_agreement"])))
    else:
        unmeasured.append(say("int2.short"))
    tb = row("token", bits)
    if tb is not None:
        first, last = tb["kl_first_quarter"], tb["kl_last_quarter"]
        ratio = last / max(first, 1e-30)
        verdict, why = ((Verdict.RIGHT, say("accumulate.why.grows")) if ratio > 1.5 else
                        (Verdict.CLOSE, say("accumulate.why.little")) if ratio > 1.1 else
                        (Verdict.NEEDS_CONTEXT, say("accumulate.why.flat" if ratio >= 1 / 1.1 else
                                                    "accumulate.why.falls") + say("accumulate.why.free")))
        out.append(_claim("accumulate", lang, say("accumulate.computed", bits=f"{bits}", first=f"{first:.2e}",
                                                  last=f"{last:.2e}", x=f"{ratio:.2f}"), verdict, why, float(ratio)))
    tr, tf = row("token_res", bits), row("token_first", bits)
    recent = say("recent.short")
    if tr is not None and tf is not None and residual is not None and num_tokens is not None \
            and residual >= num_tokens:
        untestable.append(say("recent.covers", what=recent, R=f"{residual}", n=f"{num_tokens:,}",
                              kr=f"{tr['kl']:.1e}", kf=f"{tf['kl']:.1e}"))
    elif tr is not None and tf is not None and residual == 0:
        untestable.append(say("recent.r0", what=recent))
    elif tr is not None and tf is not None and tf["kl"] == tr["kl"]:
        untestable.append(say("recent.same", what=recent, kl=f"{tf['kl']:.1e}"))
    elif tr is not None and tf is not None:
        why = (say("recent.why.holds", x=f"{tf['kl'] / max(tr['kl'], 1e-30):,.0f}") if tf["kl"] > tr["kl"] else
               say("recent.why.not", x=f"{tr['kl'] / max(tf['kl'], 1e-30):,.1f}"))
        out.append(_claim("recent", lang, say("recent.computed", bits=f"{bits}", last=dl(tr), first=dl(tf)),
                          Verdict.RIGHT if tf["kl"] > tr["kl"] else Verdict.WRONG, why,
                          float(tf["kl"] / max(tr["kl"], 1e-30))))
    return SeedCheck(tuple(out), tuple(unmeasured), tuple(untestable), lang)
