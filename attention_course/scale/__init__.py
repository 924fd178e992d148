"""Chapters 7 and 8: attention at scale and training fast, measured: memory, time, FLOPs, latent attention."""
