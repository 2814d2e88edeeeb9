"""Errors the core raises; each message says what the caller should do instead."""


class EnvError(ValueError):
    """Invalid use of the environment (bad task, split, or a step that is not allowed)."""


class UnknownTask(EnvError):
    pass


class EpisodeFinished(EnvError):
    pass


class UnknownDifficulty(EnvError):
    pass


class DifficultyMismatch(EnvError):
    """A reset named a task and a difficulty that is not the task's."""
