"""Grading a class on several machines (``make grade CLUSTER=...``, ``make grade-worker``), on Dask distributed.

Phase 3 of ``make grade`` grades each notebook on its own; with a cluster, its notebooks are graded on the
workers of a Dask scheduler instead of the instructor's thread pool. Each grading host runs one worker
(:mod:`.worker`: the sandbox's preflight, then one grader with its zygote for the worker's life); the
instructor's side (:mod:`.client`) sends each notebook's bytes, refuses a report whose digests are not its own,
and signs and saves it as a local grading does. Everyone speaks TLS with the course's certificates
(:mod:`.certificates`, ``make cluster-certs``).
"""
