from app.placeholder import render_coming

render_coming(
    'kv_memory',
    [
        ('Per-token, per-request and total KV bytes, formula step by step', 'issue 6; seed 001'),
        ('MHA / GQA / MQA / MLA, sliding-window and hybrid layers, dtypes', 'seeds 000, 002, 004'),
        ('Real model presets and GPU capacity', 'published config.json values'),
        ("The tiny model's measured cache bytes next to the formula", 'sim/kvcache.py'),
    ],
)
