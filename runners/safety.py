"""Whether what plugins and the box run is confined here, said where people look: every admin
page (a banner), `serve`'s first lines and `/healthz`.

Confinement is the default (`runners.runtime.sandbox`, the box's `sandbox` backend). Plugins
or the box run unconfined only by the operator's choice (`LANGHOST_PLUGIN_SANDBOX=off`,
`LANGHOST_BOX_BACKEND=host-unsafe`) or, for plugins under `auto`, on a machine that offers no
confinement at all; `LANGHOST_PLUGIN_SANDBOX=required` refuses to start there instead.
"""

from django.conf import settings

from runners.box import services as box_services
from runners.runtime.confine import landlock_abi
from runners.runtime.sandbox import SandboxUnavailable, confinement, sandbox_for

UNCONFINED = "unconfined"
YIELDING_MODES = ("auto", "off")  # they start whatever the machine offers
LANDLOCK_NET_ABI = 4  # the first with TCP port rules


def plugin_confinement() -> str:
    """`bwrap` or `namespaces`; `external` for a runtime LangHost does not start; else
    `unconfined`."""
    if settings.LANGHOST_RUNTIME_URL:
        return "external"
    return confinement(settings.LANGHOST_PLUGIN_SANDBOX) or UNCONFINED


def box_confinement() -> str:
    """`sandbox` (confined), an SDK backend's name, or `unavailable` (no box can be had)."""
    if settings.LANGHOST_BOX_BACKEND == box_services.SANDBOX:
        return "unavailable" if box_services.why_no_box() else box_services.SANDBOX
    return settings.LANGHOST_BOX_BACKEND


def report() -> dict[str, str]:
    return {"plugins": plugin_confinement(), "box": box_confinement()}


def warnings() -> list[str]:
    """What runs unconfined here, each said with how to confine it."""
    said = []
    if plugin_confinement() == UNCONFINED:
        said.append("Plugins run unconfined: a plugin can read this machine's files, LangHost's "
                    "data dir and secrets included. Install bubblewrap or allow unprivileged "
                    "user namespaces, and leave LANGHOST_PLUGIN_SANDBOX at auto or required.")
    if (plugin_confinement() not in (UNCONFINED, "external")
            and settings.LANGHOST_SANDBOX_CLOSED_PORTS and landlock_abi() < LANDLOCK_NET_ABI):
        said.append("This kernel cannot close TCP ports to confined processes (Landlock 4 or "
                    "later): plugins can connect to LangHost's own ports.")
    if settings.LANGHOST_BOX_BACKEND not in box_services.BACKENDS:
        said.append(box_services.why_no_box())
    if settings.LANGHOST_BOX_BACKEND == "host-unsafe":
        said.append("The box runs a model's commands as LangHost's own user, isolated from "
                    "nothing (LANGHOST_BOX_BACKEND=host-unsafe): use the sandbox backend.")
    return said


def refusal() -> str | None:
    """Why LangHost must not start: the plugin sandbox mode insists on confinement that
    cannot be had here (or names no mode)."""
    mode = settings.LANGHOST_PLUGIN_SANDBOX
    if settings.LANGHOST_RUNTIME_URL or mode in YIELDING_MODES:
        return None
    try:
        sandbox_for(mode)
    except SandboxUnavailable as exc:
        return str(exc)
    return None
