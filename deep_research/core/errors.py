"""Typed errors, each with the exit code the CLI maps it to (in one place: cli.main).

    DeepResearchError                 1  anything we raise on purpose
    ├── UsageError                    2  bad input: empty or huge question, bad flag value
    │   └── BudgetTooSmall           11  the limits admit no research: refused before any spend
    ├── ConfigError                   3  invalid settings / .env
    │   └── SettingRefused            3  the provider refuses a setting the whole run uses (also
    │                                    a ProviderError): the run stops, naming the setting
    ├── SessionError                  4  unknown, malformed or corrupt session
    │   └── SessionLocked             5  another process is driving this session
    ├── ProviderError                 6  the model provider failed after retries
    │   └── StructuredOutputError     6  a structured output never parsed
    ├── KnowledgeBaseError            7  embedding model mismatch, server unreachable, store failure
    │   └── KBMissing                 7  there is no KB of that name
    ├── StorageError                  8  a file or folder of ours cannot be written: read-only,
    │                                    full disk, no permission, a file where a folder goes
    ├── BranchError                   -  a research branch failed: recorded on the node, never exits
    │   └── JobCancelled              -  its remote job was cancelled: the node is ``cancelled``
    └── BudgetExhausted               -  work the budget cannot cover: the run stops, never exits

Ctrl-C exits with 130 after the session is saved; declining an expensive run exits with 10;
a run that stopped with no findings exits with 12 (its report says why); any other
exception is a bug: one line naming its crash log, exit 70.
"""

from __future__ import annotations

from typing import Literal

BudgetReason = Literal["cost_limit", "token_limit", "time_limit"]


class DeepResearchError(Exception):
    exit_code = 1


class UsageError(DeepResearchError):
    exit_code = 2


class BudgetTooSmall(UsageError):
    """The cost or token limit cannot pay for one branch once the report's reserve and the
    plan are kept back; the message names what would fit."""

    exit_code = 11


class ConfigError(DeepResearchError):
    exit_code = 3


class SessionError(DeepResearchError):
    exit_code = 4


class SessionLocked(SessionError):
    exit_code = 5


class ProviderError(DeepResearchError):
    exit_code = 6


class StructuredOutputError(ProviderError):
    pass


class SettingRefused(ConfigError, ProviderError):
    """The provider refused a setting every branch of the run sends alike (the research
    jobs' flex tier): no branch could succeed, so the run stops at the first refusal, saved as
    failed, its message naming the setting to change. Nothing was created at the provider."""


class KnowledgeBaseError(DeepResearchError):
    exit_code = 7


class StorageError(DeepResearchError):
    """The data directory (or a file in it) cannot be written; the message names the path."""

    exit_code = 8


class KBMissing(KnowledgeBaseError):
    """There is no knowledge base of that name (every other KB failure is its parent)."""


class BranchError(DeepResearchError):
    """A branch could not produce findings; the orchestrator records it on the node."""


class JobCancelled(BranchError):
    """The node's remote job was cancelled (``sessions cancel``, or at the provider)."""


class BudgetExhausted(DeepResearchError):
    """Raised before dispatch when the remaining budget cannot cover a call's worst case."""

    def __init__(self, message: str, reason: BudgetReason = "cost_limit") -> None:
        super().__init__(message)
        self.reason = reason


EXIT_INTERRUPTED = 130
EXIT_DECLINED = 10
"""The user answered no when asked to confirm an expensive run (nothing was spent)."""
EXIT_NO_FINDINGS = 12
"""The run stopped before any sub-question was researched: its report has no findings."""
EXIT_BUG = 70
"""An exception that is not one of ours: a bug. Its traceback goes to a crash log."""
