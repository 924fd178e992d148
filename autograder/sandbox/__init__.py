"""Running a student's code apart from the grader, in a sandbox of its own.

:mod:`.process` starts a sandbox (with :mod:`.uids`, :mod:`.bwrap`, :mod:`.cgroups`, :mod:`.limits` and
:mod:`.launcher`); the grader talks to it through :mod:`.channel` and :mod:`.client`; :mod:`.worker` runs inside
it; the plain-data messages between them are :mod:`.wire` and :mod:`.values`.
"""
