"""Chapter 10, what attention heads learn: circuits and patching, on an attention-only model and a published one."""
