"""The golden examples: a few sentences per language pinned whole, as a reader sees them (issue 35).

The other tests pin which message a function chose and with which numbers (the "keys" pseudo-language,
sim.words.catalog.PSEUDO), so a copy edit in assets/i18n/ breaks none of them; it updates these, and only these.
Each test names the file whose asserts it was moved from."""

from sim.alloc.block_pool import BlockPool, simulate_parallel_sampling
from sim.words import paging

# --- from tests/test_pool_views.py ---------------------------------------------------------------

def test_pool_views_golden():
    fork = simulate_parallel_sampling(33, 5, 40, 8)
    assert paging.fork_summary(fork) == (
        "The prompt is prefilled once into 5 blocks; forking gives every branch the same table and raises each "
        "block's **ref_cnt** to 5. The prompt's last block is only partly full, so the first write of each branch "
        "into it copies it (copy-on-write: 4→5, 4→6, 4→7, 4→8); the last branch finds ref_cnt 1 and writes in place. "
        "4 blocks stay shared (labelled ×n).")
    pool = BlockPool(6, 4)
    pool.add_request(0, 5)
    pool.add_request(1, 3)
    snap = pool.snapshot(7)
    assert paging.request_line(snap, 0) == "Request **0** holds **5** tokens in **2** blocks (62% of their 8 slots)."
    assert paging.request_line(snap, 0, lang="ko") == "요청 **0**: 토큰 **5**개를 블록 **2**개에 담고 있다(슬롯 8개 중 62%)."
