"""Text for people: what a submission may put on a terminal, the course's Markdown as plain text."""
