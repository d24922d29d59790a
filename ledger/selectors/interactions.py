"""Read side of interactions."""

from ledger.models import Interaction


def of_conversation(conversation_id: str):
    """The conversation's interactions, newest first."""
    return Interaction.objects.filter(conversation_id=conversation_id).order_by("-id")


def find(conversation_id: str, interaction_id: str) -> Interaction | None:
    """The conversation's latest interaction of this (runner-given) id."""
    return of_conversation(conversation_id).filter(interaction_id=interaction_id).first()
