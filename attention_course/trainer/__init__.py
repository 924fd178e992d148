"""``make train``: the course's training program, a module per part (nanoGPT's ``train.py``, in parts).

``python -m attention_course.trainer`` runs it (:mod:`attention_course.trainer.command`).
"""
