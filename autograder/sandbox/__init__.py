"""Running a student's code apart from the grader: the sandboxed process (:mod:`.process`), the
worker that runs inside it (:mod:`.worker`), and the plain-data messages between them (:mod:`.wire`)."""
