"""The lesson's model-free numbers, their tables and their figures (numpy only)."""
