"""The Serving page in Korean: sentences worded from known numbers (exact strings, the same numbers as the English),
refusals and trace errors in the page language while their English (and the command line's) stays as it was, the
step-through's events, readable table headers, and every tab rendered with ?lang=ko."""

import pytest

from app.serving_tabs import column_name, readable, rows_frame
from sim.alloc.trace import TraceError, parse_trace
from sim.msg import Msg
from sim.refusal import Refusal
from sim.serving import studies as sd
from sim.serving.speculative import spec_timing
from sim.words import engine_readouts as er
from sim.words import say, why
from sim.words import serving_readouts as ro
from sim.words.catalog import PSEUDO
from sim.words.serving import cell, event_line
from sim.words.spec_run import draft_label, spec_summary
from tests.conftest import run_page
from tests.test_i18n import hangul_share, rendered_text


def test_batching_titles_in_korean_keep_the_numbers():
    assert ro.occupancy_takeaway(75.87, 177.68, 256, "ko") == (
        "평균 전파에서 쓸모 있는 일을 하는 요청: 연속 배치 178개, 정적 배치 76개 (최대 배치 256)")
    assert ro.occupancy_takeaway(75.87, 177.68, 256, lang=PSEUDO) == 'serving.s.occ.continuous(c=178, s=76, cap=256)'
    assert ro.latency_takeaway((53.55, 110.52), (6.23, 14.94), "ko") == (
        "연속 배치의 종단 간 지연 시간: p50에서 8.60× 낮음(6.23 s 대 53.55 s), p99에서 7.40× 낮음(14.94 s 대 110.52 s)")


def test_engine_titles_in_korean():
    assert er.preemption_takeaway(10.0, 8.5, 12_000, 3.2e12, 2_500_000_000, 0.4, "PCIe 5.0 x16", 3, 5, "ko") == (
        "스왑이 p99 요청을 8.50 s에 끝낸다(재계산은 10.00 s): 재계산은 토큰 12,000개를 다시 계산했고(3.2 TFLOP), "
        "스왑은 PCIe 5.0 x16 링크로 2.50 GB를 옮겼다(0.40 s)")
    assert er.step_takeaway(2, 5, 6, 2, 1, 0, 1, "ko") == (
        "단계 2 뒤: 블록 6개 중 5개를 돌고 있는 요청 2개가 차지; 1개 대기, 1개 이 단계에서 끝남")
    assert er.step_takeaway(2, 5, 6, 2, 1, 0, 1, lang=PSEUDO) == (
        'serving.s.e.after_step(step=2, held=serving.s.e.held(used=5, n=6, '
        'running=2))serving.s.e.queues(queues=serving.s.e.waiting(n=1), '
        'serving.s.e.finished(n=1))')


def test_a_refusal_is_english_as_raised_and_korean_on_the_page():
    with pytest.raises(Refusal) as info:
        spec_timing("llama-3.1-8b", "llama-3.1-70b", "h100-sxm")
    assert str(info.value) == why(info.value, "en") and why(info.value, PSEUDO) == (
        'serving.err.draft_slow(draft=Llama 3.1 70B, d=42.23, target=Llama 3.1 8B, t=4.84, '
        'c=8.73)')
    assert why(info.value, "ko").startswith(
        "초안 모델 Llama 3.1 70B의 디코딩 단계는 42.23 ms로, 검증 모델 Llama 3.1 8B의 4.84 ms보다 짧지 않다(c = 8.73)")
    assert why(ValueError("plain"), "ko") == "plain"  # not worded by a catalog: shown as raised


def test_trace_errors_keep_their_english_and_word_themselves_in_korean():
    with pytest.raises(TraceError) as info:
        parse_trace(b'{"prompt_len": 10}\n')
    assert why(info.value, PSEUDO) == (
        'serving.trace.at_field(where=serving.trace.line(n=1), field=output_len, '
        'message=serving.trace.no_output)')
    assert why(info.value, "ko") == "1번째 줄: output_len: 없음 (요청이 만들어 내는 토큰 수)"
    with pytest.raises(TraceError) as info:
        parse_trace(b'{"output_len": 4, "prompt_len": NaN}\n')
    assert why(info.value, PSEUDO) == (
        'serving.trace.at(where=serving.trace.line(n=1), '
        'message=serving.trace.bad_constant(name=NaN))')


def test_step_through_events_and_rows_in_both_languages():
    step = sd.run_scenario("recompute").steps[3]
    assert step.events[:2] == (Msg("serving.ev.recompute", r=2, blocks=[4, 5]), Msg("serving.ev.took", r=0, blocks=[5]))
    assert event_line("en", step.events[0]) == "request 2 preempted (recompute): blocks [4, 5] freed"
    assert tuple(event_line("ko", e) for e in step.events[:2]) == ("요청 2 선점(재계산): 블록 [4, 5] 해제",
                                                                 "요청 0: 블록 [5] 받음")
    first = sd.run_scenario("recompute").steps[0]
    assert rows_frame(first, "ko").to_dict("list") == {"요청": ["r0", "r1", "r2"], "한 일": ["프리필"] * 3,
                                                       "토큰": [6, 6, 4]}
    assert list(rows_frame(first).columns) == ["request", "did", "tokens"]


def test_a_prefill_after_cached_blocks_is_worded_from_its_number_in_both_languages():
    """The row kind is a message with the number of cached tokens: no sentence is read back (issue 35)."""
    kind = Msg("serving.did.after", n=8)
    assert sd.run_scenario("prefix").steps[1].rows[1] == (1, kind, 4)  # r1: 8 of its 12 tokens cached
    assert (say("en", kind), say("ko", kind)) == ("prefill after 8 cached", "캐시 8개 뒤 프리필")


def test_a_recorded_run_pickles_for_the_page_cache():
    """st.cache_data pickles a run; its steps hold messages (a Msg once failed to pickle)."""
    import pickle

    run = sd.run_scenario("prefix")
    again = pickle.loads(pickle.dumps(run))
    assert again.steps[1].rows == run.steps[1].rows and again.steps[1].events == run.steps[1].events


def test_tables_get_readable_headers_and_worded_cells():
    assert [column_name(c) for c in ("ttft_p50_s", "hit_rate_pct", "itl_p99_ms", "makespan_s")] == [
        "TTFT p50 (s)", "hit rate (%)", "inter-token p99 (ms)", "total time (s)"]
    assert [column_name(c, "ko") for c in ("ttft_p50_s", "hit_rate_pct")] == ["첫 토큰 시간 p50 (s)", "적중률 (%)"]
    pool = Msg("serving.cell.pool_disaggregated", p=2, d=2)
    assert (cell("en", pool), cell("ko", pool)) == ("disaggregated (2 prefill + 2 decode)", "분리 (프리필 2 + 디코딩 2)")
    assert cell("ko", Msg("serving.cell.pool_colocated", n=4)) == "함께 둠 (GPU 4개)"
    assert cell("ko", Msg("serving.cell.gpu_plus_host_plus_disk")) == "GPU + 호스트 + 디스크"
    # text is never looked up by its English: a plain string (a trace's own name) stays as it is
    assert cell("ko", "GPU + host + disk") == "GPU + host + disk" and cell("ko", "my request 7") == "my request 7"


def test_every_study_gives_its_text_cells_as_messages_row_for_row():
    """The tables' text columns are worded from the runs' messages (cell_msgs), one per row, so the Korean table
    never depends on the English text the CSV keeps (issue 35)."""
    from sim.serving import comparison as cp
    from sim.serving import offload as of
    from sim.serving import routing as rt

    small = cp.ServingSetup(workload=cp.LengthWorkloadConfig(num_requests=40))
    runs = [cp.run_serving(small), sd.compare_preemption(sd.PreemptionSetup()),
            of.run_offload(of.OffloadSetup()), rt.run_routing(rt.RoutingSetup())]
    for run in runs:
        frame = run.to_frame()
        for col, msgs in run.cell_msgs.items():
            assert len(msgs) == len(frame)
            # the English words of each message are the frame's own text, row for row
            assert [cell("en", m) for m in msgs] == [str(v) for v in frame[col]], col
            assert readable(frame, "ko", run.cell_msgs)[col].tolist() == [cell("ko", m) for m in msgs]
    import pandas as pd

    frame = pd.DataFrame({"router": ["round-robin", "prefix-aware"], "hit_rate_pct": [10.0, 60.0]})
    msgs = {"router": [Msg("serving.cell.round_robin"), Msg("serving.cell.prefix_aware")]}
    assert readable(frame, "ko", msgs)["router"].tolist() == ["라운드 로빈", "프리픽스 인지"]
    assert readable(frame, "en", msgs).equals(frame)  # English: the data as the simulators word it


@pytest.mark.parametrize("tab", ["chunked", "preemption", "steps", "offload", "disagg", "routing", "trace"])
def test_every_tab_renders_in_korean(tab):
    at = run_page("serving", {"lang": "ko", "tab": tab, "live": "0"}, timeout=300)
    assert not at.exception, at.exception
    assert not at.error and not at.warning, [e.value for e in [*at.error, *at.warning]]
    share = hangul_share(rendered_text(at))
    print(f"serving tab={tab}: {share:.1%} Hangul")
    assert share >= 0.6, (tab, share)


def test_the_live_speculative_run_in_korean_keeps_its_numbers():
    """The real-model run's paragraph and the draft names: the same numbers and branches as the English."""
    from sim.model import speculative as sp

    run = sp.SpecRun(k=3, prompt_ids=[1, 2], new_ids=[5, 6, 7, 8, 9], target_ids=[5, 6, 7, 8, 9], accepted=[3, 0],
                     spec_s=0.125, target_s=0.0675, draft_step_s=0.001, target_step_s=0.00227, verify_s=0.0029,
                     target_layers=4, draft_layers=1)
    ko = spec_summary(run, "ko")
    assert ko.startswith("타깃 패스 2번으로 토큰 5개를 만들었습니다. 드래프트는 검증받은 경우의 **75%**에서 맞았습니다. "
                         "출력은 타깃 혼자 디코딩한 것과 **똑같습니다**. ")
    # c = 1 / 2.27 = 0.44 far above 1 of 4 layers; verify 2.9 / 2.27 = 1.28 steps; 67.5 / 125 = 0.54×: did not pay
    assert "타깃 스텝의 c = 0.44만큼 들어, 레이어 비율 0.25보다 훨씬 큽니다." in ko
    assert "토큰 하나짜리 스텝 1.28번만큼 듭니다." in ko and "여기서는 이득이 없었습니다(0.54×)." in ko
    assert "125 ms" in ko and "68 ms" in ko and "2.90 ms" in ko and "2.27 ms" in ko
    assert draft_label("mqa", "ko") == "따로 학습한 MQA 모델"
    assert draft_label("mqa", lang=PSEUDO) == 'serving.spec.draft_model(name=MQA)'


def test_link_names_in_korean_on_the_disaggregation_tab():
    from sim.serving.links import GPU_LINKS, HOST_LINKS
    from sim.words.shrink_table import link_name
    from tests.conftest import run_page

    assert link_name(GPU_LINKS["nvlink4"], "ko") == "NVLink 4 (H100, 같은 노드)"
    assert link_name(GPU_LINKS["nvlink4"], "en") == GPU_LINKS["nvlink4"].name == "NVLink 4 (H100, same node)"
    assert link_name(HOST_LINKS["pcie5"], "ko") == "PCIe 5.0 x16"  # an identifier: the same in both
    at = run_page("serving", {"lang": "ko", "tab": "disagg"}, timeout=300)
    assert not at.exception
    assert "100 Gb 이더넷 (노드 간)" in at.selectbox(key="dg_link").options
