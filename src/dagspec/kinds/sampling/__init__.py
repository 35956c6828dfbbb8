"""Row selection kinds: undersample, split, sample."""
