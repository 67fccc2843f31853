"""The SAIHM tools the binding client serves and its one entry point: ``prepare(tool, args)``,
the pre-send checks of that tool (one module each) and how its answer is judged."""
from __future__ import annotations

from collections.abc import Mapping

from ownmem.binding.forget import prepare_forget
from ownmem.binding.governance import prepare_propose, prepare_vote
from ownmem.binding.recall import prepare_recall
from ownmem.binding.remember import prepare_remember
from ownmem.binding.revoke import prepare_revoke
from ownmem.binding.share import prepare_share
from ownmem.binding.status import prepare_status
from ownmem.binding.transport import Prepared

TOOLS = ("saihm_remember", "saihm_recall", "saihm_forget", "saihm_status", "saihm_share",
         "saihm_revoke_share", "saihm_governance_propose", "saihm_governance_vote")


def prepare(tool: str, args: Mapping[str, object], *, holder_id: str | None = None) -> Prepared:
    """The pre-send checks of ``tool`` over the agent's arguments; ``holder_id`` serves recall."""
    if tool == "saihm_recall":
        return prepare_recall(args, holder_id)
    return {"saihm_remember": prepare_remember, "saihm_forget": prepare_forget,
            "saihm_status": prepare_status, "saihm_share": prepare_share,
            "saihm_revoke_share": prepare_revoke, "saihm_governance_propose": prepare_propose,
            "saihm_governance_vote": prepare_vote}[tool](args)
