"""The Lesson page's parts: its URL state and navigation (`nav`), and one renderer per step, grouped as
the seeds group them: generation (`generation`), cost (`cost`), and the ways out (`ways_out`)."""
