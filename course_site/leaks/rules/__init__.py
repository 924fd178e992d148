"""The leak rules, each a function that yields the problems of one kind in a published text file, run in this order."""

from course_site.leaks.rules import markers, secret_lines, solution_code

RULES = (markers.find, solution_code.find, secret_lines.find)
