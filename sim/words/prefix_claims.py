"""The seeds' claims about prefix caching, checked against the lab's own runs, and the sentences that
quote those runs (seed 002's 5x for agents, the branch run's finding).

Pure functions: every number comes from the result passed in. The real-model branch run (sim/model) is
read by its fields only, and the K/V change arrives as its own finding, so this module never imports torch.
"""

from __future__ import annotations

from sim.alloc.prefix_cache import HitTotals
from sim.alloc.prefix_sweeps import TwoPrompts, WorkloadOverview
from sim.alloc.workload import TIMESTAMP_LEN
from sim.claims import Claim, Verdict
from sim.words import text
from sim.words.prefix import demo_finding

NOT_RUN = text("en", "prefix.claim.not_run")

# The seeds' own words for each claim (shared/seeds/000_*.txt and 002_*.txt), quoted verbatim.
ORIGINAL = {
    "one_byte": "그래서 프롬프트 재사용은 처음부터 연속된 접두부에만 가능하고, 중간이나 접미부는 재사용할 수 없다.",
    "layout": "프롬프트(프리픽스) 캐시는 처음부터 연속된 접두부에만 유효하므로, 고정된 내용을 앞에 두고 가변 내용을 "
              "뒤에 두는 배치가 성능을 좌우한다.",
    "reuse": "동일한 시스템 프롬프트(system prompt), 퓨샷(few-shot) 예시, 긴 문맥 문서의 KV를 여러 호출 사이에서 "
             "재사용합니다.",
    "agent": "도구(tool) 프롬프트가 반복되는 에이전트(agent) 작업 부하에서는 접두부 캐싱만으로도 처리량이 흔히 5배 정도 "
             "늘어납니다.",
    "branch": "프롬프트 P와 여러 완성(completion)이 있을 때, P에 대해 순방향 전파를 한 번 돌려 KV 캐시를 채우고 완성별로 "
              "분기합니다. 매번 P를 다시 인코딩(encoding)하는 방식과 비교해 속도 향상을 측정합니다.",
}


def agent_finding(agent: HitTotals, decode_weight: float, lang: str = "en") -> str:
    return text(lang, "prefix.claim.agent_finding", hit=f"{100 * agent.hit_rate:.1f}",
                speedup=f"{agent.prefill_speedup:.2f}", gain=f"{agent.throughput_gain(decode_weight):.2f}",
                w=f"{decode_weight:g}")


def agent_paragraph(agent: HitTotals, decode_weight: float, lang: str = "en") -> str:
    """Seed 002's 'about 5x for agents' against the simulated agent loop (Markdown)."""
    gain = agent.throughput_gain(decode_weight)
    if f"{gain:.2f}" == "5.00":
        versus = text(lang, "prefix.claim.versus.same")
    elif gain < 5:
        versus = text(lang, "prefix.claim.versus.short")
    else:
        versus = text(lang, "prefix.claim.versus.past")
    return text(lang, "prefix.claim.agent_paragraph", hit=f"{100 * agent.hit_rate:.1f}",
                speedup=f"{agent.prefill_speedup:.2f}", w=f"{decode_weight:g}", gain=f"{gain:.2f}", versus=versus)


def timestamp_why(overview: WorkloadOverview | None, lang: str = "en") -> str:
    """What moving the timestamp to the top did to the hit rate, worded by which way it went."""
    if overview is None:
        return text(lang, "prefix.claim.ts.none", n=f"{TIMESTAMP_LEN}")
    below, above = (100 * overview.get("timestamp", layout).hit_rate for layout in ("fixed_first", "variable_first"))
    if f"{below:.1f}" == f"{above:.1f}":
        return text(lang, "prefix.claim.ts.same", n=f"{TIMESTAMP_LEN}", below=f"{below:.1f}")
    verb = "drops" if above < below else "raises"
    return text(lang, f"prefix.claim.ts.{verb}", n=f"{TIMESTAMP_LEN}", below=f"{below:.1f}", above=f"{above:.1f}")


def branch_finding(run, lang: str = "en") -> str:
    """A sim.model.prefix_run branch run, in the seeds table's words."""
    same = text(lang, "prefix.claim.identical" if run.tokens_identical else "prefix.claim.different")
    return text(lang, "prefix.claim.branch_finding", n=f"{run.num_branches}", bytes=f"{len(run.prefix_ids)}",
                time=f"{100 * run.prefill_saved_share:.0f}", tokens=f"{100 * run.token_saved_share:.0f}", same=same)


def prefix_claims(demo: TwoPrompts | None, overview: WorkloadOverview | None, decode_weight: float,
                  real: str | None = None, kv: str | None = None, lang: str = "en") -> tuple[Claim, ...]:
    """The seeds' claims with what this run of the page computed. A section that did not run (bad settings,
    the real model off) is named instead of its numbers. `real` and `kv` come worded in `lang` already."""

    def hit(workload: str, layout: str) -> str:
        return "?" if overview is None else f"{100 * overview.get(workload, layout).hit_rate:.1f}%"

    def w(key: str, **fields: str) -> str:
        return text(lang, f"prefix.claim.{key}", **fields)

    not_run = w("not_run")
    demo_text = w("section1") if demo is None else demo_finding(demo, lang)
    agent = None if overview is None else overview.get("agent", "fixed_first")
    return (
        Claim(
            statement=text("en", "prefix.claim.one_byte.statement"), seed="000", claimed=w("one_byte.claimed"),
            computed=w("one_byte.computed", demo=demo_text, kv=kv or not_run), verdict=Verdict.RIGHT,
            why=w("one_byte.why"), original=ORIGINAL["one_byte"]),
        Claim(
            statement=text("en", "prefix.claim.layout.statement"), seed="000", claimed=w("layout.claimed"),
            computed=w("layout.computed", rag_fixed=hit("rag", "fixed_first"), rag_var=hit("rag", "variable_first"),
                       ts_fixed=hit("timestamp", "fixed_first"), ts_var=hit("timestamp", "variable_first")),
            verdict=Verdict.RIGHT, why=timestamp_why(overview, lang), original=ORIGINAL["layout"]),
        Claim(
            statement=text("en", "prefix.claim.reuse.statement"), seed="002", claimed=w("reuse.claimed"),
            computed=w("reuse.computed", hit=hit("system_prompt", "fixed_first")),
            verdict=Verdict.RIGHT, why=w("reuse.why"), original=ORIGINAL["reuse"]),
        Claim(
            statement=text("en", "prefix.claim.agent.statement"), seed="002", claimed=w("agent.claimed"),
            computed=w("section2") if agent is None else agent_finding(agent, decode_weight, lang),
            verdict=Verdict.NEEDS_CONTEXT, why=w("agent.why"), original=ORIGINAL["agent"],
            value=None if agent is None else agent.throughput_gain(decode_weight)),
        Claim(
            statement=text("en", "prefix.claim.branch.statement"), seed="002", claimed=w("branch.claimed"),
            computed=real or not_run, verdict=Verdict.RIGHT, why=w("branch.why"), original=ORIGINAL["branch"]),
    )
