"""The Paged KV blocks page: the numbers it shows are the simulator's, its state lives in the URL."""


import numpy as np
import pandas as pd
import pytest
from streamlit.runtime.memory_media_file_storage import _calculate_file_id
from streamlit.testing.v1 import AppTest

from sim.alloc.block_pool import simulate_parallel_sampling
from sim.alloc.paged_schedule import simulate_paged_stepwise
from sim.alloc.policies import Comparison, compare_policies
from sim.alloc.schedule import POLICIES, PoolConfig
from sim.alloc.workload import LengthWorkloadConfig, make_workload
from sim.model.transformer import checkpoint_path
from sim.msg import Msg
from sim.words import say
from tests.conftest import run_page, unescaped


def open_page(**params) -> AppTest:
    params.setdefault("live", "0")  # the real-model section has its own test
    at = run_page("paged_blocks", params)
    assert not at.exception, at.exception
    return at


def expected(**kw) -> Comparison:
    serving = {k: kw.pop(k) for k in ("capacity_tokens", "block_size") if k in kw}
    return compare_policies(make_workload(LengthWorkloadConfig(**kw)), PoolConfig(**serving))


def shown_numbers(at: AppTest) -> tuple[list[str], list[str]]:
    values = [m.value for m in at.metric]
    return values[0:4], values[4:8]  # real-token shares, then mean running requests, in POLICIES order


def assert_matches(at: AppTest, cmp: Comparison) -> None:
    shares, running = shown_numbers(at)
    assert shares == [f"{100 * cmp.results[p].token_share:.1f}%" for p in POLICIES]
    assert running == [f"{cmp.results[p].mean_running:.1f}" for p in POLICIES]
    table = cmp.to_frame().drop(columns=["allocation"]).round(2)
    pd.testing.assert_frame_equal(at.dataframe[0].value.reset_index(drop=True), table)
    speedup = cmp.results["reserve_max_len"].makespan / cmp.results["paged"].makespan
    assert any(f"**{speedup:.2f}×** sooner" in m.value for m in at.markdown)


def test_defaults_show_the_simulators_numbers_and_export_them():
    at = open_page()
    cmp = expected()
    assert_matches(at, cmp)
    shares, _ = shown_numbers(at)
    assert float(shares[0].rstrip("%")) > 96 and all(20 <= float(s.rstrip("%")) <= 40 for s in shares[1:])
    # the CSV behind the download button is exactly the table shown
    csv = cmp.to_frame().drop(columns=["allocation"]).round(2).to_csv(index=False).encode()
    button = at.get("download_button")[0]
    assert button.proto.url.endswith(f"/{_calculate_file_id(csv, 'text/csv', 'paged_blocks.csv')}.csv")
    assert len(csv.decode().splitlines()) == 5 and csv.decode().startswith("policy,real_tokens_pct,")


def test_widgets_change_the_numbers_and_the_url():
    at = open_page()
    at.number_input(key="requests").set_value(300)
    at.selectbox(key="lengths").set_value("uniform")
    at.slider(key="block_size").set_value(32)
    at.number_input(key="capacity").set_value(8192)
    at.run()
    assert not at.exception
    assert_matches(at, expected(num_requests=300, length_dist="uniform", capacity_tokens=8192, block_size=32))
    assert at.query_params["requests"] == ["300"] or at.query_params["requests"] == "300"
    for key, value in (("lengths", "uniform"), ("block_size", "32"), ("capacity", "8192")):
        got = at.query_params[key]
        assert (got[0] if isinstance(got, list) else got) == value
    # the block-size example (its own tab) follows the slider: 17 tokens in 32-token blocks
    at = open_page(block_size=32, tab="block_size")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Blocks of 32"] == "1" and metrics["Share of their slots used"] == "53.1%"
    assert at.query_params["tab"] == "block_size"


def test_a_shared_link_opens_the_same_view():
    params = dict(requests=250, block_size=8, seed=3, arrival="poisson", rate=0.2, spread=1.5, max_tokens=512)
    at = open_page(**params)
    assert at.number_input(key="requests").value == 250
    assert at.slider(key="block_size").value == 8
    assert at.radio(key="arrival").value == "poisson"
    assert at.number_input(key="rate").value == pytest.approx(0.2)
    assert not at.warning
    assert_matches(at, expected(num_requests=250, seed=3, arrival="poisson", arrival_rate=0.2, spread=1.5,
                                max_tokens=512, block_size=8))


def test_the_page_opens_on_where_the_memory_goes_and_each_section_from_its_link():
    """One section at a time: the default is the finding (memory and how many fit); the others open from tab=."""
    at = open_page()
    assert at.query_params["tab"] == "memory" and len(at.get("plotly_chart")) == 3
    for tab in ("pool", "block_size", "fork"):
        other = open_page(tab=tab)
        assert other.query_params["tab"] == tab and other.get("plotly_chart")
        assert not [m for m in other.metric if m.label == "Paged (vLLM)"]  # the memory section did not run


def test_bad_url_values_fall_back_with_a_warning():
    at = open_page(requests="lots", block_size="999", lengths="zipf", rate="nan", capacity="-5")
    warned = " ".join(w.value for w in at.warning)
    for key in ("requests", "block_size", "lengths", "rate", "capacity"):
        assert f"`{key}`" in warned
    assert "`999` is outside 1..256" in warned
    assert_matches(at, expected())


@pytest.mark.parametrize("params, msg", [
    (dict(prompt_mean=3000), Msg("alloc.err.prompt_mean", hi=2047, got=3000)),
    (dict(max_len=4096, capacity=2048), Msg("alloc.err.capacity", cap=2048, max_len=4096)),
    (dict(output_mean=2000), Msg("alloc.err.output_mean", max_tokens=1024, got=2000)),
])
def test_impossible_settings_are_an_error_not_a_traceback(params, msg):
    at = open_page(**params)
    assert len(at.error) == 1 and say("en", msg) in unescaped(at.error[0].value)
    assert not at.metric


def test_block_grid_and_table_come_from_the_pool():
    at = open_page(requests=200, frame=10, tab="pool")
    wcfg, scfg = LengthWorkloadConfig(num_requests=200), PoolConfig()
    cmp = compare_policies(make_workload(wcfg), scfg)
    last = min(cmp.results["paged"].makespan - 1, 20_000)
    step = int(round(10 * last / 40))
    snap = simulate_paged_stepwise(make_workload(wcfg), scfg, [step]).snapshots[step]
    running = sorted(snap.req_to_block_table)
    box = at.selectbox(key="req")
    assert box.options == [str(r) for r in running] and box.value == running[0]
    box.set_value(running[-1]).run()
    assert not at.exception
    pd.testing.assert_frame_equal(at.dataframe[0].value.reset_index(drop=True), snap.table_frame(running[-1]))
    n = snap.req_to_num_tokens[running[-1]]
    blocks = len(snap.req_to_block_table[running[-1]])
    assert any(f"Request **{running[-1]}** holds **{n}** tokens in **{blocks}** blocks" in m.value for m in at.markdown)
    free = ", ".join(str(b) for b in snap.free_block_queue[:12])
    assert any(f"({len(snap.free_block_queue):,} blocks), next handed out: {free}" in m.value for m in at.markdown)
    assert at.query_params["req"] in (str(running[-1]), [str(running[-1])])


def test_parallel_sampling_numbers():
    at = open_page(fork_prompt=33, fork_n=5, fork_gen=40, block_size=8, tab="fork")
    r = simulate_parallel_sampling(33, 5, 40, 8)
    metrics = {m.label: m.value for m in at.metric}
    # 33 tokens = 4 full blocks + 1 token; each branch ends with 73 tokens = 10 blocks, 4 of them shared
    assert metrics["Blocks in use (shared)"] == f"{r.num_used_blocks:,}" == "34"
    assert metrics["Blocks if copied"] == f"{r.num_blocks_if_copied:,}" == "50"
    assert metrics["Memory saved"] == f"{100 * r.saved_share:.1f}%"
    assert metrics["Copy-on-write copies"] == "4"


def test_real_model_decodes_through_block_tables():
    at = open_page(live="1", live_new=24, live_branches=2, live_bs="4", tab="live")
    if not checkpoint_path("mha").is_file():
        assert any("not available" in w.value for w in at.warning)
        return
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[say("en", Msg("paged.m.same_tokens"))] == "yes"
    assert metrics["Largest logit difference"] == "0"
    table = at.dataframe[-1].value
    assert table["branch"].tolist() == [0, 1]
    prompt_blocks = -(-len("To be, or not to be, that is the question:") // 4)
    shared = [t.split()[: prompt_blocks - 1] for t in table["block table (* = shared)"]]
    assert shared[0] == shared[1] and all(x.endswith("*") for x in shared[0])
    assert np.all([len(t.split()) == -(-(42 + 23) // 4) for t in table["block table (* = shared)"]])
