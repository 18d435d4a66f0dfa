from app.placeholder import render_coming

render_coming(
    'attention_masks',
    [
        ('Causal, sliding-window, prefix-LM, padding and document masks', 'issue 5; seed 000'),
        ('-inf vs ×0 vs a large negative number, on real scores', 'seed 000'),
        ('Real attention maps per layer and head', 'the tiny model'),
        ('Why the cache stays valid: earlier rows unchanged when a token is appended', 'seed 004'),
    ],
)
