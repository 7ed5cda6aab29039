"""One module per pipeline stage: each turns what the Recorder captured into that stage's Stage (and tensors)."""
