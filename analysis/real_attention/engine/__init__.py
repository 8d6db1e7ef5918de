"""The engine: load a pinned model, cut units, extract and merge the maps, measure, classify heads."""

# The one place of the tool's version: real_attention.__version__ and every summary's "versions" read it.
VERSION: str = "0.1.0"
