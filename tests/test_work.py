"""run_job: cheap work starts by itself, long work waits for its button, results are shared."""

import pytest
from streamlit.testing.v1 import AppTest

from app.work import AUTO_ENV, AUTO_RUN_S, fmt_seconds
from sim.msg import Msg
from sim.words import say


@pytest.fixture(autouse=True)
def real_limit(monkeypatch):
    monkeypatch.setenv(AUTO_ENV, str(AUTO_RUN_S))


def _page():
    import streamlit as st

    from app.work import run_job

    estimate = st.session_state.get("estimate", 1.0)
    tag = st.session_state.get("tag", "a")

    def work(progress):
        progress(0.5, "half way")
        st.session_state["calls"] = st.session_state.get("calls", 0) + 1
        return f"done {tag}"

    got = run_job(f"test.demo.{tag}", estimate, estimate, work, what="A demo job", real_model=False)
    st.markdown(f"result: {got}")


def run(**state) -> AppTest:
    at = AppTest.from_function(_page)
    for k, v in state.items():
        at.session_state[k] = v
    return at.run()


def test_cheap_work_starts_by_itself():
    at = run(estimate=0.5, tag="cheap")
    assert at.markdown[-1].value == "result: done cheap" and at.session_state["calls"] == 1
    assert not at.button


def test_long_work_waits_for_its_button_then_runs():
    at = run(estimate=AUTO_RUN_S + 10, tag="long")
    assert at.markdown[-1].value == "result: None"
    assert say("en", Msg("work.would_take", t=fmt_seconds(AUTO_RUN_S + 10))) in at.info[0].value
    at.button[0].click().run()
    assert at.markdown[-1].value == "result: done long" and at.session_state["calls"] == 1
    at.run()  # the result is kept: a later run does not compute again
    assert at.markdown[-1].value == "result: done long" and at.session_state["calls"] == 1


def test_results_are_shared_between_sessions():
    run(estimate=0.5, tag="shared")
    other = run(estimate=0.5, tag="shared")
    assert other.markdown[-1].value == "result: done shared" and "calls" not in other.session_state


def test_a_page_run_starts_at_most_a_few_seconds_unasked():
    def two_jobs():
        import streamlit as st

        from app.urlstate import UrlState
        from app.work import run_job

        UrlState("demo_two")
        for i in range(3):
            got = run_job(f"test.budget{i}", i, 2.5, lambda progress: "ran", what=f"job {i}", real_model=False)
            st.markdown(f"{i}: {got}")

    at = AppTest.from_function(two_jobs).run()
    # 2.5 s each against a page budget of 5 s: two run by themselves, the third waits
    assert [m.value for m in at.markdown] == ["0: ran", "1: ran", "2: None"]
    assert "already started" in at.info[0].value


def test_an_estimate_says_where_it_comes_from_and_is_corrected_as_the_run_goes():
    from sim.work.queue import RateBook, remaining_s

    at = run(estimate=AUTO_RUN_S + 10, tag="basis")  # a kind no run has finished: the cost model's word alone
    assert at.info[0].value.endswith(say("en", Msg("work.basis.model", prior=fmt_seconds(AUTO_RUN_S + 10))))
    book = RateBook()
    book.observe("k", 10.0, 30.0)  # a first run took 3× the model's estimate
    assert book.num_runs("k") == 1 and book.factor("k") == 3.0 and book.estimate("k", 10.0) == 30.0
    # while the run goes: the estimate less what has passed, then (from a tenth done) the pace so far
    assert remaining_s(2.0, 0.05, 12.0) == 10.0 and remaining_s(20.0, 0.05, 12.0) == 0.0
    assert remaining_s(30.0, 0.25, 12.0) == 90.0 and remaining_s(10.0, 0.5, 100.0) == 10.0  # exact in binary
