"""Who may read or act on disputes: one rule per act, asked by the admin, the staff API and the MCP
tools alike (SPEC §5, §19's last point; issue 38 item 1), so no surface can open a door another
keeps shut.

The rules are the admin's own answers written once: a dispute's page is readable by whoever holds
its view (or change) permission or any permission that reads packets; a packet's review page by
whoever may read, edit, approve or file packets; evidence by its view (or change) permission or
the packets' readers. Every act also needs what it shows afterwards: admitting evidence, asking for
a packet and entering a dispute all answer with the dispute, so each needs the dispute read too.
Only active staff pass any rule (the admin lets no one else in)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.exceptions import PermissionDenied
from disputes.services import PERM_APPROVE, PERM_FILE

PERM_VIEW_DISPUTE = "disputes.view_dispute"
PERM_ADD_DISPUTE = "disputes.add_dispute"
PERM_VIEW_PACKET = "disputes.view_packet"
PERM_EDIT = "disputes.change_packet"
PERM_VIEW_EVIDENCE = "disputes.view_evidence"
PERM_ADMIT = "disputes.add_evidence"

# Whoever may approve or file a packet must be able to read it first.
REVIEW_PERMISSIONS = (PERM_VIEW_PACKET, PERM_EDIT, PERM_APPROVE, PERM_FILE)


@dataclass(frozen=True)
class Rule:
    """An act and what it needs: active staff holding one of `any_of`, and passing every rule in
    `also`. `permission` is the one a refusal names (the one to ask for)."""

    act: str  # for a person: "Reading disputes"
    permission: str
    any_of: tuple[str, ...]
    also: tuple[Rule, ...] = ()

    def allows(self, user: Any) -> bool:
        if not (getattr(user, "is_active", False) and getattr(user, "is_staff", False)):
            return False
        return any(user.has_perm(p) for p in self.any_of) and all(
            rule.allows(user) for rule in self.also
        )

    def refusal(self) -> PermissionDenied:
        """The refusal every surface gives (403 `permission_denied`), naming the permission."""
        return PermissionDenied(
            f"{self.act} needs the permission {self.permission}, as in the admin.",
            details={"permission": self.permission, "any_of": list(self.any_of)},
        )

    def require(self, user: Any) -> None:
        """Refuse `user` unless the rule allows them; asked before anything is looked up."""
        if not self.allows(user):
            # The rule this one leans on is the one to name when it is what fails.
            for rule in self.also:
                if not rule.allows(user):
                    raise rule.refusal()
            raise self.refusal()


READ_DISPUTES = Rule(
    "Reading disputes",
    PERM_VIEW_DISPUTE,
    (PERM_VIEW_DISPUTE, "disputes.change_dispute", *REVIEW_PERMISSIONS),
)
READ_PACKETS = Rule("Reading dispute packets", PERM_VIEW_PACKET, REVIEW_PERMISSIONS)
READ_EVIDENCE = Rule(
    "Reading evidence",
    PERM_VIEW_EVIDENCE,
    (PERM_VIEW_EVIDENCE, "disputes.change_evidence", *REVIEW_PERMISSIONS),
)
ADMIT_EVIDENCE = Rule("Admitting evidence", PERM_ADMIT, (PERM_ADMIT,), also=(READ_DISPUTES,))
# Asking for a version changes the dispute's packet (it supersedes the current one).
PREPARE_PACKET = Rule("Asking for a packet", PERM_EDIT, (PERM_EDIT,), also=(READ_DISPUTES,))
ENTER_DISPUTE = Rule(
    "Entering a dispute", PERM_ADD_DISPUTE, (PERM_ADD_DISPUTE,), also=(READ_DISPUTES,)
)
EDIT_PACKET = Rule("Editing a packet", PERM_EDIT, (PERM_EDIT,))
APPROVE_PACKET = Rule("Approving a packet", PERM_APPROVE, (PERM_APPROVE,))
FILE_PACKET = Rule("Filing a packet", PERM_FILE, (PERM_FILE,))

# The admin's acts by the permission each one names (disputes/admin/common.py `_acting_user`).
BY_PERMISSION: dict[str, Rule] = {
    PERM_ADMIT: ADMIT_EVIDENCE,
    PERM_EDIT: EDIT_PACKET,
    PERM_APPROVE: APPROVE_PACKET,
    PERM_FILE: FILE_PACKET,
}

# What reading each model's admin list and pages needs (`_DisputesAdmin.has_view_permission`).
READ_BY_MODEL: dict[str, Rule] = {
    "dispute": READ_DISPUTES,
    "packet": READ_PACKETS,
    "evidence": READ_EVIDENCE,
}


def rule_for_permission(permission: str) -> Rule:
    """The rule of the act that names `permission` (a rule of that one permission if none)."""
    return BY_PERMISSION.get(permission) or Rule(f"This ({permission})", permission, (permission,))
