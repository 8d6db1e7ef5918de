"""The live page and JSON API of `real-attention serve`: one model loaded at start-up, answering new sentences."""
