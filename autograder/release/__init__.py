"""What is shipped and released: the course's settings, references, students' packages, Colab cell."""
