"""Chapter 9: published checkpoints read into the course's layers, and generation from them.

The checkpoints (``pretrained``) and their layouts (``layouts``), batches of prompts (``batching``), speculative
decoding (``speculative``) and ``make generate`` (``generate``).
"""
