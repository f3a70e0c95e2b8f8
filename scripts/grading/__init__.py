"""Grading outside the student's reach: the sandbox, the worker that runs a submission in it,
the safe wire between them, the source checks, and the grader that computes every verdict."""
