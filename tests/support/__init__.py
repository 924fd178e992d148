"""Helpers for the grading tests: what a sandbox leaves on the host, and running as another user."""
