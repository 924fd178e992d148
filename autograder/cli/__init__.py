"""The commands of the Makefiles: make grade, make check, make validate, make exercises, make similarity."""
