"""The guided lesson: its steps, the sentence each step states (computed from its result) and the
check-yourself questions (answered by the same sim/ functions the full pages use). numpy only."""
