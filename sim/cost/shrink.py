"""Ways to shrink the KV cache, side by side: the lecture's table of methods (what each shrinks, whether
it stacks with quantization, where the lab shows it), offloading as a cost per decode step, and the
verdict on the lecture's sharpest claim, computed from a table of measured scores."""

from __future__ import annotations

from dataclasses import dataclass

from sim.refusal import Misuse

# The caches the page runs (sim/model/evict_cache.py builds them; a test keeps the names in step).
EVICT_METHODS = ("window", "sinks", "h2o", "snapkv")
QUANT_METHODS = ("fp8", "int8", "kivi4", "kivi2")
ALL_METHODS = EVICT_METHODS + QUANT_METHODS
BUDGETS = (0.125, 0.25, 0.5)  # of the run's positions, for the eviction methods
MAX_LONG_NEW = 900  # the bundled models were trained at 1,024 positions: prompt + 900 new stays inside
LONG_PROMPT = "KING HENRY:\nNow, lords, if God doth give successful end\nTo this debate that bleedeth at our doors,\n"


@dataclass(frozen=True)
class Method:
    key: str  # its row in the catalog: shrink.table.<key>.name / .shrinks / .stacks (English there; sim/words words it)
    name_ko: str  # the lecture's own words (seed 001), quoted
    shrinks_ko: str
    stacks_ko: str
    where: str  # the lab page that shows it (slug), "" for this page
    where_params: tuple[tuple[str, str], ...] = ()


# Seed 001's table, row by row (its Korean quoted, the English in the catalog), with where the lab shows each.
METHODS: tuple[Method, ...] = (
    Method("gqa", "GQA·MQA", "식의 $H_{kv}$를 줄인다", "그렇다. 이미 대부분의 최신 모델에 들어 있다", "kv_memory",
           (("tab", "variants"),)),
    Method("mla", "MLA(잠재 압축)", "K·V를 저차원으로 압축해 저장한다", "그렇다. 모델 구조 자체의 선택이라 나중에 바꿀 수 없다",
           "kv_memory", (("tab", "variants"),)),
    Method("window", "슬라이딩 윈도우", "오래된 토큰을 아예 버려 $S$를 묶는다", "그렇다. 다만 버린 토큰은 되돌릴 수 없다", ""),
    Method("eviction", "토큰 축출", "덜 중요한 토큰만 골라 버린다", "그렇다. 무엇이 덜 중요한지 판단이 들어간다", ""),
    Method("prefix", "프리픽스 캐싱", "같은 앞부분을 요청끼리 공유한다", "그렇다. 요청이 겹칠 때만 효과가 있다", "prefix_caching"),
    Method("offload", "CPU·디스크 이관", "안 쓰는 캐시를 밖으로 내린다", "그렇다. 다시 올릴 때 지연이 붙는다", ""),
)


@dataclass(frozen=True)
class Link:
    name: str
    bytes_per_s: float  # one direction, decimal (vendor figures)
    source: str
    name_key: str = ""  # the catalog key of its name where it has words beyond identifiers ("same node")


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
    def transfer_ms(self) -> float:
        return self.transfer_s * 1e3

    @property
    def hbm_ms(self) -> float:
        return self.hbm_s * 1e3


def offloaded_bytes(cache_bytes: int, percent: int) -> int:
    """The part of a request's cache kept off the GPU: `percent` of it, in whole bytes (rounded down)."""
    return cache_bytes * percent // 100


def offload_cost(offloaded_bytes: int, link: str, hbm_bytes_per_s: float) -> OffloadCost:
    # the page asks for every link in LINKS, with a preset's bandwidth and a slider's share of a computed cache
    if link not in LINKS:
        raise Misuse(f"link must be one of {', '.join(LINKS)}, got {link!r}")
    if offloaded_bytes < 0 or hbm_bytes_per_s <= 0:
        raise Misuse("offloaded bytes must be >= 0 and the bandwidth > 0")
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


def check_methods_and_budgets(methods: tuple[str, ...], budgets: tuple[float, ...]) -> None:
    """A shrink grid's methods are known ones and its budgets fractions in (0, 1] (ValueError naming them)."""
    # the page and the recording script pass the lab's own method and budget tuples
    bad = [m for m in methods if m not in (*EVICT_METHODS, *QUANT_METHODS)]
    if bad or not methods:
        raise Misuse(f"methods must be among {', '.join((*EVICT_METHODS, *QUANT_METHODS))}, got {bad}")
    if not budgets or any(not 0 < b <= 1 for b in budgets):
        raise Misuse(f"budgets must be fractions in (0, 1], got {budgets}")


@dataclass(frozen=True)
class ShrinkSetup:
    methods: tuple[str, ...]
    budgets: tuple[float, ...] = BUDGETS
    num_new: int = MAX_LONG_NEW
    num_trials: int = 4
    seed: int = 0

    def __post_init__(self) -> None:
        check_methods_and_budgets(self.methods, self.budgets)
        # the page's long generation is a stop of 128..900 tokens and its trials a control of 1..8
        if not 16 <= self.num_new <= MAX_LONG_NEW:
            raise Misuse(f"the long generation must be 16..{MAX_LONG_NEW} tokens, got {self.num_new}")
        if not 1 <= self.num_trials <= 8:
            raise Misuse(f"trials must be 1..8, got {self.num_trials}")

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


def quote_verdict(worse: int, better: int, same: int, full_quote: float) -> str:
    """Seed 001's claim judged from the pairings (each quantized cache against the discarding cache of about its
    bytes): "cannot" when the full cache itself quotes under half (the check cannot tell), "as_lecture" when
    discarding quoted worse in every pairing, "against" when better in every one, "neither" when the same in every
    one, else "mixed". One rule for the tiny model's grid and the real model's recorded one."""
    n = worse + better + same
    if full_quote < 0.5:
        return "cannot"
    if worse == n:
        return "as_lecture"
    if better == n:
        return "against"
    if same == n:
        return "neither"
    return "mixed"
