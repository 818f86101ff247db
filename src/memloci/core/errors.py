"""Error types: one per error code, each with a message and a hint for the caller.

The code is what clients branch on; the message names the field and the rule; the hint
says what to do next. MCP adapters turn these into `{error: {code, message, hint}}`.
"""

from __future__ import annotations

import errno
from typing import Any


class MemlociError(Exception):
    """Base of every error memloci reports to a caller."""

    code = "INTERNAL_ERROR"
    default_hint = ""

    def __init__(self, message: str, *, hint: str | None = None, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint if hint is not None else self.default_hint
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message, "hint": self.hint}
        if self.details:
            body["details"] = self.details
        return {"error": body}


class NotFoundError(MemlociError):
    code = "NOT_FOUND"
    default_hint = "Check the name with search_nodes or read_graph, or create it first."


class LibraryMissingError(NotFoundError):
    """A mounted library whose file or folder is not created yet (read-only commands do not create it)."""

    default_hint = "A library is created by its first write (memloci serve, memloci import)."


class ValidationError(MemlociError):
    code = "VALIDATION_ERROR"
    default_hint = "Fix the named field and send the call again; nothing was changed."


class AlreadyExistsError(MemlociError):
    code = "ALREADY_EXISTS"
    default_hint = "Pick another name, or update the existing item instead."


class InvalidRelationError(MemlociError):
    code = "INVALID_RELATION"
    default_hint = "Create the missing entities with create_entities first; nothing was changed."


class ConflictError(MemlociError):
    code = "CONFLICT"
    default_hint = "Read the current state and retry."


class AwaitingConfirmationError(MemlociError):
    code = "AWAITING_CONFIRMATION"

    def to_dict(self) -> dict[str, Any]:
        body = super().to_dict()
        body["error"]["detected_root"] = self.details.get("detected_root")  # where the caller can point
        return body
    default_hint = "Repeat the call with the confirmation argument set."


class PermissionDeniedError(MemlociError):
    code = "PERMISSION_DENIED"
    default_hint = "Check the path and its permissions."


class StorageFullError(MemlociError):
    """The disk (or the user's quota) is full: nothing was changed, and retrying helps once space is freed."""

    code = "STORAGE_FULL"
    default_hint = "Free disk space (or move the library to another disk) and send the call again; nothing was changed."


class StorageUnavailableError(MemlociError):
    """The library's storage cannot be reached now (its database server is down, or does not
    answer): nothing was changed, and the same call succeeds once it is back. Not CONFLICT:
    nothing competes with the call, and sending it again at once does not help."""

    code = "STORAGE_UNAVAILABLE"
    default_hint = ("Nothing was changed. The library's database server is down or does not answer; send the call "
                    "again once it is back (memloci connects again by itself, no restart needed).")


READ_ONLY_HINT = ("The file or its folder is read-only (a read-only mount, or no write permission): make it writable, "
                  "or mount the library from a writable folder. Nothing was changed.")


def storage_error(exc: OSError, message: str) -> MemlociError:
    """The error a failed file operation deserves: a full disk is not a permission problem."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StorageFullError(f"{message}: the disk is full ({exc.strerror})")
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return PermissionDeniedError(f"{message}: {exc.strerror}", hint=READ_ONLY_HINT)
    return PermissionDeniedError(f"{message}: {exc.strerror or exc}")


class InternalError(MemlociError):
    code = "INTERNAL_ERROR"
    default_hint = "This is a fault in memloci or its storage; the server log has details."


class LibraryUnreadableError(InternalError):
    """A library that exists but cannot be read: never treated as an empty one."""

    default_hint = (
        "memloci will not overwrite it. Restore the file from a backup, fix its permissions, "
        "or mount another path."
    )


def error_for_code(code: str, message: str, hint: str | None = None) -> MemlociError:
    """The error of `code` (as `to_dict` wrote it, e.g. by another memloci process), with its message."""
    def every(cls: type[MemlociError]) -> list[type[MemlociError]]:
        return [cls, *[c for sub in cls.__subclasses__() for c in every(sub)]]

    kind = next((c for c in every(MemlociError) if c.code == code), MemlociError)
    return kind(message, hint=hint)
