from app.placeholder import render_coming

render_coming(
    'serving',
    [
        ('Static vs continuous batching under a KV-memory budget', 'issue 12; seed 002'),
        ('TTFT, TPOT and latency percentiles', 'sim/serving.py'),
        ('Speculative decoding: acceptance rate vs speedup', 'seed 002'),
    ],
)
