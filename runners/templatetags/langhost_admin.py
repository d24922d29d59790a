"""Template helpers for LangHost's admin pages."""

from django import template
from django.db.models import Q

from ledger.models import Transcript

register = template.Library()


@register.simple_tag
def run_transcript(run):
    """The transcript entries of a run: the message that started it and what it answered."""
    if run is None or not run.conversation_id:
        return Transcript.objects.none()
    return Transcript.objects.filter(conversation_id=run.conversation_id).filter(
        Q(event_id=run.event_id) | Q(run_id=run.run_id)
    ).order_by("id")
