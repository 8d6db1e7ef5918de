"""The syntax probe behind ra.syntax and `real-attention syntax` (named parsing, so it never shadows ra.syntax)."""
