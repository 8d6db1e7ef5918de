"""real-attention's analysis: one module per step, text -> model -> words -> heads -> tables -> plots."""
