"""Attention itself: masks (torch), the online softmax (numpy), kernel timing (torch, imported lazily)."""
