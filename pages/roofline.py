from app.placeholder import render_coming

render_coming(
    'roofline',
    [
        ('Arithmetic intensity of prefill vs decode on hardware presets', 'issue 11; seeds 000, 002'),
        ('Batch sweep: shared weights vs per-request KV bytes', 'sim/roofline.py'),
        ("This machine's measured point", 'live bandwidth and matmul tests'),
    ],
)
