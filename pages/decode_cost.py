from app.placeholder import render_coming

render_coming(
    'decode_cost',
    [
        ('Naive vs cached generation on the real model, same tokens proven', 'issue 4; seeds 000, 002, 004'),
        ('Per-step and cumulative FLOPs: counted vs closed form', 'sim/opcount.py'),
        ('Wall time per step and tokens/s, measured live', 'sim/generate.py'),
        ("The seeds' 100-token example: 5,050 vs 100 K/V computations", 'seed 002'),
    ],
)
