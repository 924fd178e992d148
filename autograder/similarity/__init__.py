"""Near-identical submissions: code as clone detectors compare it, written answers as word runs."""
