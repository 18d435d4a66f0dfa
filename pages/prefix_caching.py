from app.placeholder import render_coming

render_coming(
    'prefix_caching',
    [
        ('Hashed full blocks chained to their parent, LRU eviction', 'issue 8; seeds 000, 002'),
        ('Hit rate by workload and by prompt layout', 'seed 000'),
        ('Real prefill time saved on the tiny model', 'sim/generate.py'),
    ],
)
