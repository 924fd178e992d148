"""``attention_course.flash``, the earlier name of chapter 11's library, now in :mod:`attention_course.kernels`.

Its names are the kernels' modules' (``load_triton``, ``attention``, ``output_of``, ``time_on_gpu``, ...), and
``python -m attention_course.flash FILE`` runs ``python -m attention_course.kernels.timing FILE``.
"""

from attention_course.moved import run_as_main

if __name__ == "__main__":
    run_as_main("attention_course.kernels.timing")
else:
    from attention_course.kernels.interpreter import INTERPRET, load_triton
    from attention_course.kernels.plain import attention, attention_gradients
    from attention_course.kernels.signatures import grad_k_of, grad_q_of, grad_v_of, lse_of, output_of
    from attention_course.kernels.timing import module_source, time_on_gpu

__all__ = [
    "INTERPRET",
    "attention",
    "attention_gradients",
    "grad_k_of",
    "grad_q_of",
    "grad_v_of",
    "load_triton",
    "lse_of",
    "module_source",
    "output_of",
    "time_on_gpu",
]
