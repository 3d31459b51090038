"""Errors a user can fix. The CLI prints each as one line and exits with code 2."""


class MlmprepError(Exception):
    """Base class: the message names the file or option at fault and what to do."""


class ConfigError(MlmprepError, ValueError):
    """An option value or option combination that cannot work."""


class CorpusError(MlmprepError):
    """A corpus file or dataset that cannot be read as asked."""


class TokenizerError(MlmprepError):
    """A tokenizer that is missing, unreadable or lacks the special tokens mlmprep needs."""


class CacheError(MlmprepError):
    """A build output directory that is missing, foreign, locked or built with other options."""
