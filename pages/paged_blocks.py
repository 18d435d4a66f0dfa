from app.placeholder import render_coming

render_coming(
    'paged_blocks',
    [
        ('Block pool: block tables, free list, ref counts, copy-on-write', 'issue 7; seed 002'),
        ('Contiguous baselines and their fragmentation', 'seed 002'),
        ('1,000 chat completions simulated: memory used by real tokens', 'vLLM paper anchors'),
    ],
)
