"""Long-term key-value stores that outlive a single thread's checkpoints."""
