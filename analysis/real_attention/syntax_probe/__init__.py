"""The syntax probe behind ra.syntax and `real-attention syntax` (named syntax_probe, so it never shadows ra.syntax)."""
