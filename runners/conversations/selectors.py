"""Who sees what: the one place that decides which agents, conversations and runs a user sees.

- Agents: those of projects the user owns or belongs to (superusers: all).
- Conversations: only their owner's (a project member does not see another member's).
- Runs: the run's actor, the owner of its project, and superusers; so a member sees the runs
  of their own conversations and messages, not another member's.
"""

import uuid

from django.db.models import Q

from accounts.models import Project
from ledger.models import AgentRun
from ledger.selectors import runs as run_selectors
from runners.models import AgentInstance


def visible_projects(user):
    return Project.objects.visible_to(user)


def visible_agents(user):
    """`user=None` is the operator at the command line, who sees every agent."""
    agents = AgentInstance.objects.select_related("agent_type", "project")
    if user is None or user.is_superuser:
        return agents
    return agents.filter(project__in=visible_projects(user))


def visible_agent(user, agent_id, project_id=None) -> AgentInstance | None:
    """The agent if the user may see it; None otherwise (also for ids that are not UUIDs)."""
    try:
        agent_id = uuid.UUID(str(agent_id))
        project_id = uuid.UUID(str(project_id)) if project_id is not None else None
    except ValueError:  # not an id of anyone's agent
        return None
    agents = visible_agents(user).filter(pk=agent_id)
    if project_id is not None:
        agents = agents.filter(project_id=project_id)
    return agents.first()


def visible_runs(user):
    runs = run_selectors.all_runs()
    if user.is_superuser:
        return runs
    owned = [str(pk) for pk in Project.objects.filter(owner=user).values_list("pk", flat=True)]
    return runs.filter(Q(actor_type="user", actor_id=str(user.pk)) | Q(project_id__in=owned))


def visible_run_sets(user) -> list:
    """The runs `user` sees, as querysets each served by one index (their union is
    `visible_runs`): all runs for a superuser; else the runs they started, and those of each
    project they own."""
    if user.is_superuser:
        return [run_selectors.all_runs()]
    owned = Project.objects.filter(owner=user).values_list("pk", flat=True)
    return [run_selectors.started_by(str(user.pk)),
            *(run_selectors.of_project(str(pk)) for pk in owned)]


def can_view_run(user, run: AgentRun) -> bool:
    return visible_runs(user).filter(pk=run.pk).exists()
