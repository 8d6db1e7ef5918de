"""The engine: load a pinned model, cut units, extract and merge the maps, measure, classify heads."""
