"""The tasks and their data: date translation, symbol substitution, the character corpus, BPE, the four words.

Chapters 1 to 10 and ``make train`` read them.
"""
