"""Ways to shrink the KV cache, side by side: the lecture's table of methods (what each shrinks, whether
it stacks with quantization, where the lab shows it), offloading as a cost per decode step, and the
verdict on the lecture's sharpest claim, computed from a table of measured scores."""

from __future__ import annotations

from dataclasses import dataclass

from sim.cost.memory import fmt_bytes, fmt_decimal

# The caches the page runs (sim/model/evict_cache.py builds them; a test keeps the names in step).
EVICT_METHODS = ("window", "sinks", "h2o", "snapkv")
QUANT_METHODS = ("fp8", "int8", "kivi4", "kivi2")
BUDGETS = (0.125, 0.25, 0.5)  # of the run's positions, for the eviction methods
MAX_LONG_NEW = 900  # the bundled models were trained at 1,024 positions: prompt + 900 new stays inside
LONG_PROMPT = "KING HENRY:\nNow, lords, if God doth give successful end\nTo this debate that bleedeth at our doors,\n"


@dataclass(frozen=True)
class Method:
    name: str
    shrinks: str  # English
    stacks: str  # whether it combines with quantization, and the catch (English)
    shrinks_ko: str  # the lecture's own words (seed 001)
    stacks_ko: str
    where: str  # the lab page that shows it (slug), "" for this page
    where_params: tuple[tuple[str, str], ...] = ()


# Seed 001's table, row by row (its Korean quoted, the English beside it), with where the lab shows each.
METHODS: tuple[Method, ...] = (
    Method("GQA · MQA", "fewer K/V heads: the formula's H_kv", "yes; most recent models already have it",
           "식의 $H_{kv}$를 줄인다", "그렇다. 이미 대부분의 최신 모델에 들어 있다", "kv_memory", (("tab", "variants"),)),
    Method("MLA (latent compression)", "stores K and V compressed to a low-rank latent",
           "yes; it is the model's architecture, fixed once trained", "K·V를 저차원으로 압축해 저장한다",
           "그렇다. 모델 구조 자체의 선택이라 나중에 바꿀 수 없다", "kv_memory", (("tab", "variants"),)),
    Method("Sliding window", "drops old tokens outright, bounding S", "yes; but a dropped token cannot come back",
           "오래된 토큰을 아예 버려 $S$를 묶는다", "그렇다. 다만 버린 토큰은 되돌릴 수 없다", ""),
    Method("Token eviction", "drops only the tokens judged less important", "yes; it needs a judgement of what "
           "matters less", "덜 중요한 토큰만 골라 버린다", "그렇다. 무엇이 덜 중요한지 판단이 들어간다", ""),
    Method("Prefix caching", "requests share the same leading blocks", "yes; it helps only when requests overlap",
           "같은 앞부분을 요청끼리 공유한다", "그렇다. 요청이 겹칠 때만 효과가 있다", "prefix_caching"),
    Method("CPU · disk offload", "moves the cache not in use out of GPU memory", "yes; bringing it back adds "
           "latency", "안 쓰는 캐시를 밖으로 내린다", "그렇다. 다시 올릴 때 지연이 붙는다", ""),
)


@dataclass(frozen=True)
class Link:
    name: str
    bytes_per_s: float  # one direction, decimal (vendor figures)
    source: str


# Host -> GPU links, one direction: PCIe x16 signalling rates after encoding; NVLink-C2C per direction.
LINKS: dict[str, Link] = {
    "pcie4": Link("PCIe 4.0 x16", 31.5e9, "PCI-SIG: 16 GT/s × 16 lanes, 128b/130b encoding"),
    "pcie5": Link("PCIe 5.0 x16", 63.0e9, "PCI-SIG: 32 GT/s × 16 lanes, 128b/130b encoding"),
    "c2c": Link("NVLink-C2C (Grace Hopper)", 450e9, "NVIDIA: 900 GB/s total, 450 GB/s each way"),
    "nvme": Link("NVMe SSD (PCIe 4.0 x4)", 7.0e9, "a fast PCIe 4.0 x4 drive's sequential read"),
}


@dataclass(frozen=True)
class OffloadCost:
    offloaded_bytes: int  # per request, the part of its cache kept off the GPU
    link: Link
    hbm_bytes_per_s: float

    @property
    def transfer_s(self) -> float:
        """Each decode step reads the whole cache, so the offloaded part crosses the link every step."""
        return self.offloaded_bytes / self.link.bytes_per_s

    @property
    def hbm_s(self) -> float:
        return self.offloaded_bytes / self.hbm_bytes_per_s

    @property
    def sentence(self) -> str:
        ratio = self.transfer_s / self.hbm_s if self.hbm_s else 1.0
        moved = (f"Bringing {fmt_bytes(self.offloaded_bytes)} back over {self.link.name} "
                 f"({fmt_decimal(self.link.bytes_per_s)}/s) takes {self.transfer_s * 1e3:,.1f} ms per decode step")
        hbm = f"the {self.hbm_s * 1e3:,.2f} ms the GPU needs to read it from its own memory " \
              f"({fmt_decimal(self.hbm_bytes_per_s)}/s)"
        if ratio > 1:
            return (f"{moved}, {ratio:,.1f}× {hbm}: offload pays only for caches that are not read every step "
                    "(a paused conversation, a prefix waiting for its next hit).")
        return f"{moved}, no slower than {hbm}: on this link offloading costs nothing per step."


def offload_cost(offloaded_bytes: int, link: str, hbm_bytes_per_s: float) -> OffloadCost:
    if link not in LINKS:
        raise ValueError(f"link must be one of {', '.join(LINKS)}, got {link!r}")
    if offloaded_bytes < 0 or hbm_bytes_per_s <= 0:
        raise ValueError("offloaded bytes must be >= 0 and the bandwidth > 0")
    return OffloadCost(offloaded_bytes, LINKS[link], hbm_bytes_per_s)


@dataclass(frozen=True)
class Score:
    """One method at one budget, scored against the full cache."""

    method: str  # a key of the methods run
    label: str
    kind: str  # "discard" (eviction, windows), "blur" (quantization) or "full"
    byte_fraction: float  # of the full FP16 cache, at the run's length
    long_agreement: float  # fraction of the long generation's tokens equal to the full cache's
    quote: float  # fraction of the quoted bytes reproduced exactly
    turns: float  # fraction of the earlier turn's fact reproduced exactly


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _pct1(x: float) -> str:
    return f"{100 * x:.1f}%"


def verdict(scores: list[Score], full_quote: float) -> str:
    """Does discarding hurt the exact quote more than blurring at equal bytes? Each quantized cache is set
    against the discarding cache whose bytes are nearest its own (the larger on a tie), best policy at that
    budget; the sentence gives both byte shares and says what the model showed, either way."""
    blur = [s for s in scores if s.kind == "blur"]
    discard = [s for s in scores if s.kind == "discard"]
    if not blur or not discard:
        return "Run both a quantized and an evicting cache to compare blurring with discarding."
    parts, worse, better = [], 0, 0
    for b in sorted(blur, key=lambda s: s.byte_fraction):
        nearest = min(discard, key=lambda d: (abs(d.byte_fraction - b.byte_fraction), -d.byte_fraction))
        peers = [d for d in discard if d.byte_fraction == nearest.byte_fraction]
        best = max(peers, key=lambda d: d.quote)
        worse += best.quote < b.quote
        better += best.quote > b.quote
        parts.append(f"{b.label} ({_pct(b.byte_fraction)} of the bytes) quotes {_pct1(b.quote)}, the best discarding "
                     f"cache near its bytes ({best.label}, {_pct(best.byte_fraction)}) {_pct1(best.quote)}")
    n, same = len(parts), len(parts) - worse - better
    tally = f"discarding hurt the exact quote more in {worse}, less in {better} and as much in {same} of {n} pairings"
    if full_quote < 0.5:
        head = (f"This model quotes only {_pct1(full_quote)} even with the full cache, so the checks cannot separate "
                f"the caches: {tally}")
    elif worse == n:
        head = "Discarding hurt the exact quote more than blurring at about equal bytes, as the lecture says"
    elif better == n:
        head = "Discarding hurt the exact quote less than blurring at about equal bytes, against the lecture"
    elif same == n:
        head = "Discarding and blurring quote exactly as well at about equal bytes: this model separates neither"
    else:
        head = f"Mixed at about equal bytes: {tally}"
    return f"{head} (the full cache quotes {_pct1(full_quote)}): " + "; ".join(parts) + "."


@dataclass(frozen=True)
class ShrinkSetup:
    methods: tuple[str, ...]
    budgets: tuple[float, ...] = BUDGETS
    num_new: int = MAX_LONG_NEW
    num_trials: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        bad = [m for m in self.methods if m not in (*EVICT_METHODS, *QUANT_METHODS)]
        if bad or not self.methods:
            raise ValueError(f"methods must be among {', '.join((*EVICT_METHODS, *QUANT_METHODS))}, got {bad}")
        if not self.budgets or any(not 0 < b <= 1 for b in self.budgets):
            raise ValueError(f"budgets must be fractions in (0, 1], got {self.budgets}")
        if not 16 <= self.num_new <= MAX_LONG_NEW:
            raise ValueError(f"the long generation must be 16..{MAX_LONG_NEW} tokens, got {self.num_new}")
        if not 1 <= self.num_trials <= 8:
            raise ValueError(f"trials must be 1..8, got {self.num_trials}")

    def runs(self) -> list[tuple[str, float | None]]:
        """(method, budget fraction), the quantization methods once each (their bytes are the format's)."""
        return [(m, b) for m in self.methods if m in EVICT_METHODS for b in self.budgets] + \
               [(m, None) for m in self.methods if m in QUANT_METHODS]


def num_runs(setup: ShrinkSetup) -> int:
    """The full cache (the reference) and every (method, budget)."""
    return 1 + len(setup.runs())


@dataclass(frozen=True)
class CopyAbility:
    """A checkpoint's full-cache scores on the two copying checks (measured by sim.model.train when it
    wrote the checkpoint, or by `--score-only`): bytes right before the first mistake, out of the most."""

    label: str
    quote: int
    quote_max: int
    fact: int
    fact_max: int

    @property
    def copies(self) -> bool:
        """Reproduces at least half of both: enough for the checks to tell one cache from another."""
        return 2 * self.quote >= self.quote_max and 2 * self.fact >= self.fact_max

    @classmethod
    def from_report(cls, label: str, scores: dict) -> CopyAbility:
        q, f = scores["exact_quote"], scores["multi_turn"]
        return cls(label, int(q["num_prefix"]), int(q["max_bytes"]), int(f["num_prefix"]), int(f["max_bytes"]))


def _of(n: int, most: int) -> str:
    return f"{n} of {most} ({n / most:.0%})" if most else f"{n} of 0"


def copy_ability_sentence(abilities: list[CopyAbility]) -> str:
    """What each model reproduces with the full cache, and which one the checks can use."""
    if not abilities:
        return "No model's full-cache scores are recorded; run the checks to measure them."
    each = "; ".join(f"{a.label} quotes {_of(a.quote, a.quote_max)} bytes of the passages and recalls "
                     f"{_of(a.fact, a.fact_max)} bytes of the facts" for a in abilities)
    able = [a.label for a in abilities if a.copies]
    unable = [a.label for a in abilities if not a.copies]
    if not able:
        tail = ("no model copies at least half of both, so the quote and recall checks cannot separate one cache "
                "from another on these models")
    elif not unable:
        tail = "each copies at least half of both, so either can judge the caches"
    else:
        tail = (f"only {' and '.join(able)} copies at least half of both, so the checks run on it by default "
                f"({' and '.join(unable)} cannot copy from that far back)")
    return f"With the full cache, {each}: {tail}."
