"""The course's models, built from the reference layers: the Transformer, its parts and its fused attention.

The models (``transformer``), the parts of published checkpoints' layers (``layers``), the fused attention
(``fused_attention``), rotary positions as checkpoints scale them (``rope``) and the conversions to PyTorch's
built-ins (``interop``): what chapters 3 to 11, ``make train`` and the published checkpoints build on.
"""
