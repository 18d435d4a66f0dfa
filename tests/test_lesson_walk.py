"""What a student would miss: a block-table story with three requests (allocate, share, copy-on-write, grow, free)
played on the lab's BlockPool, every block id the pool's own; and one token's attention walked through on the
bundled model (its query, its score against each cached key, the softmax weights, the output), equal to what the
model computed. Both step through from the URL."""

import base64
import json

import numpy as np
import pytest
import torch

from app.lesson.nav import DEFAULT_PROMPT
from sim.alloc.block_pool import BlockPool
from sim.lesson.blocks import BLOCK_SIZE, NUM_BLOCKS, block_story, touched
from sim.lesson.walk import STAGES, attention_walk
from sim.words.catalog import PSEUDO
from sim.words.lesson import event_sentence, walk_sentence
from tests.conftest import run_in_app


def test_the_story_is_the_pools_own_and_shows_every_event():
    frames = block_story()
    assert [f.event.kind for f in frames] == ["start", "allocate", "allocate", "share", "cow", "grow", "grow",
                                              "free", "free"]
    # worked by hand: 4-slot blocks from a FIFO free queue 0..11
    tables = [f.pool.req_to_block_table for f in frames]
    assert tables[1] == {0: (0, 1, 2)}  # A: 10 tokens -> 3 blocks
    assert tables[2] == {0: (0, 1, 2), 1: (3, 4)}  # B: 6 tokens -> 2 blocks
    assert tables[3][2] == (0, 1, 2) and list(frames[3].pool.ref_cnt[:3]) == [2, 2, 2]  # C shares A's blocks
    assert frames[4].event.copied == ((2, 5),) and tables[4][0] == (0, 1, 5)  # A's write copies shared block 2
    assert tables[5][2] == (0, 1, 2) and frames[5].pool.ref_cnt[2] == 1  # C writes into block 2, its own now
    assert frames[6].event.new_blocks == (6,)  # B's 6 + 3 tokens need a third block
    assert frames[7].event.freed == (5,) and frames[7].event.kept == (0, 1)  # A ends; C keeps 0 and 1
    assert frames[8].event.freed == (6, 4, 3)  # last block first, to the queue's tail
    # the same calls on a fresh pool give the same state, frame by frame
    pool = BlockPool(NUM_BLOCKS, BLOCK_SIZE)
    pool.add_request(0, 10)
    pool.add_request(1, 6)
    pool.fork(0, 2)
    pool.append(0, 1)
    pool.append(2, 1)
    pool.append(1, 3)
    pool.free(0)
    pool.free(1)
    last = frames[-1].pool
    assert tuple(pool.free_block_queue) == last.free_block_queue and pool.ref_cnt == list(last.ref_cnt)
    assert touched(frames[4]) == (5, 2) and touched(frames[3]) == (0, 1, 2)
    assert event_sentence(frames[4], lang=PSEUDO) == 'lesson.bt.cow(r=A, src=#2, o=C, dst=#5)'
    assert event_sentence(frames[7], "ko").startswith("요청 A이(가) 끝난다: 블록 #5는")


def test_the_block_table_step_follows_the_url():
    at = run_in_app("lesson", {"step": "10", "bt": "4"})
    assert not at.exception and at.query_params["bt"] == "4"
    fig = json.loads(at.get("plotly_chart")[1].proto.spec)
    pool = block_story()[4].pool
    cells = fig["data"][0]["text"][0]
    assert cells[5].startswith("#5<br>3/4<br>ref 1") and cells[2].startswith("#2<br>2/4<br>ref 1")
    assert fig["data"][1]["text"][0] == ["#0", "#1", "#5"] and fig["data"][1]["text"][2] == ["#0", "#1", "#2"]
    assert fig["layout"]["title"]["text"].startswith(f"Event 4 of 8: {pool.num_used_blocks} of 12 blocks in use")
    assert fig["layout"]["xaxis"]["title"]["text"] and fig["layout"]["xaxis2"]["title"]["text"]


@pytest.fixture(scope="module")
def run():
    from app.resources import model
    from sim.model.cache_filling import fill_cache
    from sim.model.generate import encode

    return fill_cache(model("mha"), encode(DEFAULT_PROMPT), 4)


@pytest.mark.parametrize("layer", [0, 3])
def test_the_walk_is_the_models_own_attention(run, layer):
    w = attention_walk(run, 0, layer)
    T = len(DEFAULT_PROMPT.encode())
    assert w.position == T - 1 and w.keys.shape == (T, run.head_dim)
    assert torch.equal(torch.from_numpy(w.keys).float(), run.keys(0, layer))  # the cache's own rows
    np.testing.assert_allclose(w.scores, w.keys @ w.q / np.sqrt(run.head_dim))
    assert abs(w.weights.sum() - 1) < 1e-12
    # the model's softmax ran in float32: within a few float32 roundings of ours
    assert w.max_weight_gap < 1e-5
    np.testing.assert_allclose(w.output, w.weights @ w.values)
    assert walk_sentence(w, 1, lang=PSEUDO).startswith(f"lesson.walk.s1(t={T}, d=32, ")


def test_the_walk_steps_through_from_the_url():
    for stage in range(STAGES):
        at = run_in_app("lesson", {"step": "2", "walk": str(stage)})
        assert not at.exception and at.query_params["walk"] == str(stage)
        fig = json.loads(at.get("plotly_chart")[1].proto.spec)
        y = fig["data"][0]["y"]
        if isinstance(y, dict):  # plotly's binary form: {dtype, bdata}
            y = np.frombuffer(base64.b64decode(y["bdata"]), dtype=np.dtype(y["dtype"]))
        assert fig["layout"]["xaxis"]["title"]["text"] and fig["layout"]["yaxis"]["title"]["text"]
        assert len(y) == (32 if stage in (0, 3) else len(DEFAULT_PROMPT.encode()))
        if stage == 2:
            assert abs(float(np.sum(y)) - 1) < 1e-9


def test_filling_out_of_range_is_a_refusal_in_either_language():
    from app.resources import model
    from sim.model.cache_filling import MAX_FILL_NEW, MAX_FILL_PROMPT, fill_cache
    from sim.msg import Msg
    from sim.refusal import Refusal
    from sim.words import why

    with pytest.raises(Refusal) as bad:
        fill_cache(model("mha"), [], 4)
    assert bad.value.msg == Msg("lesson.fill.bad_prompt", max=MAX_FILL_PROMPT, n=0)
    assert str(bad.value) == f"the prompt must be 1 to {MAX_FILL_PROMPT} bytes, got 0"
    with pytest.raises(Refusal) as bad:
        fill_cache(model("mha"), [65], MAX_FILL_NEW + 1)
    assert bad.value.msg == Msg("lesson.fill.bad_new", max=MAX_FILL_NEW, n=MAX_FILL_NEW + 1)
    assert why(bad.value, "ko") != str(bad.value) and f"{MAX_FILL_NEW}" in why(bad.value, "ko")
