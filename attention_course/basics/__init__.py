"""Chapters 1 to 6's helpers: the small models' training loop, metrics, diagrams, families and schedule.

The training loop and metrics of the small models (``training``), the mechanisms drawn for the figures
(``diagrams``), chapter 6's four families (``families``) and the one learning-rate schedule (``schedule``).
"""
