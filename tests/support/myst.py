"""MyST text notebooks that tests write: the front matter every page of the book starts with."""

HEADER = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""
