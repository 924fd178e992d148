"""What the course's tools read the course with: its notebooks' rules, the one parse of its code, lazy names.

The grader, the site and the reference solutions' builder (``attention_course.solutions``) import this folder; no
chapter does. It imports nothing of the course but itself.
"""
