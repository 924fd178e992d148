"""Chapter 11, FlashAttention in Triton: the interpreter, the plain attention, the signatures, timing, costs, sweep.

Triton imported in its interpreter or compiled (``interpreter``), the plain attention a kernel must reproduce
(``plain``), the exercise's signatures that the checks compare with (``signatures``), a kernel timed on a GPU
(``timing``), the chapter's costs (``costs``) and its sweep on a GPU, as the page shows it (``sweep``).
"""
