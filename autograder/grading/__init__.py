"""Grading one notebook: the assignment's source, the student's program in a sandbox, the proxies
that the test cells call, and the report."""
