"""The course's plugins for nbgrader, one per module, each named by its dotted path in ``nbgrader_config.py``.

``nbgrader autograde`` sanitises each submission with :mod:`.cell_roles` (first) and
:mod:`.restore_cells`, then grades it with :mod:`.execute` (the sandboxed grader, in place of a
Jupyter kernel) and :mod:`.sanitize`. ``nbgrader generate_feedback`` writes each student's page with
:mod:`.limit_markdown` (first), :mod:`.hide_tests` and :mod:`.sanitize`, exported by
:mod:`.feedback_html`. The feedback's and the formgrader's templates pass each cell's HTML through
:mod:`.inert`'s filters (``strip_files_prefix``, which calls :mod:`.files_prefix`'s, and ``clean_html``), and
the formgrader adds :mod:`.rubric`'s rubrics to its page of a submission.
``nbgrader collect`` is :mod:`autograder.exchange.collect`'s.
"""
