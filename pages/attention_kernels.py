from app.placeholder import render_coming

render_coming(
    'attention_kernels',
    [
        ('Eager vs SDPA backends timed live on this device', 'issue 9; seed 002'),
        ('Peak memory: N² scores vs tiled', 'measured'),
        ('The online (tiled) softmax stepped through, exact', 'seed 002'),
    ],
)
