"""The grader's side of a graded call: what runs in the grader while a student's call waits.

The call made, the stand-ins answered, the result compared, and whose fault a failure is.
"""
