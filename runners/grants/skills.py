"""The skills a run may use: its `resources.skills` (the SDK's SkillResource: `skill_name`,
`display_name`, `description`), frozen into its authorization with its other grants. They are
the installed skills its binding's config names (`skills`: the agent type's), in order."""

from runners.protocol import AgentBinding
from runners.skills.models import Skill


async def skill_grants(binding: AgentBinding) -> list[dict]:
    names = binding.runner_config.get("skills")
    if not isinstance(names, list) or not names:
        return []
    found = {skill.name: skill async for skill in Skill.objects.filter(
        name__in=[name for name in names if isinstance(name, str)])}
    return [{"skill_name": name, "display_name": found[name].display_name or name,
             "description": found[name].description}
            for name in dict.fromkeys(names) if name in found]
