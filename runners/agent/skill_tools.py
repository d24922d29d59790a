"""The built-in LLM agent's skills: the run's granted skills (`resources.skills`), activated by
the model with `activate_skill(name)`.

An activated skill's instructions join the system prompt from the next model call on; with
the box enabled, its files are copied into the conversation's workspace
(`/workspace/skills/<name>/`). The conversation keeps the names activated in its state
(`host.activated_skills`, conversation scope), so its next run starts with them active, as
seed 002's orchestrator restores them.
"""

from asgiref.sync import sync_to_async

from runners.box import services as box_services
from runners.grants.tools import ACTIVATE_SKILL
from runners.skills import services as skill_services
from runners.skills.models import Skill

STATE_KEY = "host.activated_skills"
STATE_SCOPE = "conversation"


class SkillError(ValueError):
    pass


class Skills:
    def __init__(self, granted: dict[str, Skill], active: list[str],
                 workspace: box_services.Workspace | None):
        self.granted = granted
        self.active = [name for name in active if name in granted]
        self.workspace = workspace
        self.changed = False

    @classmethod
    async def of(cls, grants: list[dict], kept,
                 workspace: box_services.Workspace | None) -> "Skills | None":
        """The run's skills (`resources.skills`), those `kept` active by its conversation."""
        names = [grant["skill_name"] for grant in grants or []]
        if not names:
            return None
        granted = {skill.name: skill async for skill in Skill.objects.filter(name__in=names)}
        return cls(granted, kept if isinstance(kept, list) else [], workspace)

    @classmethod
    async def for_run(cls, context: dict,
                      workspace: box_services.Workspace | None) -> "Skills | None":
        kept = ((context.get("state") or {}).get(STATE_SCOPE) or {}).get(STATE_KEY)
        return await cls.of((context.get("resources") or {}).get("skills"), kept, workspace)

    def tool(self) -> dict:
        listed = "; ".join(f"{name}: {skill.description}" for name, skill in self.granted.items())
        return {"name": ACTIVATE_SKILL,
                "description": f"Activate a skill to get its instructions (and, in your "
                               f"workspace, its files). Skills: {listed}",
                "parameters": {"type": "object", "required": ["name"],
                               "properties": {"name": {"type": "string"}}}}

    def instructions(self) -> str:
        return "".join(f"\n\nSkill {name} (active):\n{self.granted[name].instructions}"
                       for name in self.active)

    def state(self) -> dict:
        """The state write that keeps the activated names for the conversation's next run."""
        return {"scope": STATE_SCOPE, "key": STATE_KEY, "value": list(self.active)}

    async def activate(self, args: dict) -> tuple[dict, str]:
        """`(recorded result, what the model reads)`; SkillError with what to tell it."""
        name = args.get("name")
        skill = self.granted.get(name) if isinstance(name, str) else None
        if skill is None:
            raise SkillError(f"no skill {name!r} is granted; granted: "
                             f"{', '.join(self.granted) or 'none'}")
        copied = []
        if self.workspace is not None:
            copied = await sync_to_async(self._copy)(skill)
        if name not in self.active:
            self.active.append(name)
            self.changed = True
        shown = f"Skill {name} is active. Its instructions:\n{skill.instructions}"
        if copied:
            shown += f"\nIts files are in /workspace/skills/{name}/: {', '.join(copied)}"
        return {"skill": name, "revision": skill.revision, "files": copied}, shown

    def _copy(self, skill: Skill) -> list[str]:
        try:
            root = skill_services.package_root(skill.name)
        except skill_services.SkillError as exc:
            raise SkillError(str(exc)) from None
        copied = []
        for relative in skill.files:
            source = root / relative
            if source.is_file():
                box_services.write_file(self.workspace, f"skills/{skill.name}/{relative}",
                                        source.read_bytes())
                copied.append(relative)
        return copied


FAILURES = (SkillError, box_services.BoxError)
