"""A plugin's `Page` components: the pages it shows its operators, served as LangBot serves
them.

A page is an HTML file of the plugin (its component's `spec.path`, beside the component's
manifest) that loads the SDK's page script (`/api/v1/plugins/_sdk/page-sdk.js`) and talks to
its parent window: the parent says the theme and language (`langbot:context`) and answers the
page's calls (`langbot:api`) with what the plugin's `handle_api` returns
(`langbot:api:response`). The admin shows a page in a sandboxed frame of its own origin: the
frame's files come from a signed, short-lived path (the frame sends no cookie), and its calls
go through the admin page, as the signed-in operator.
"""

import posixpath

from django.core import signing

from runners.models import PluginInstallation

PAGE_KIND = "Page"
SALT = "langhost.plugin-page"
# How long a page's frame may load its files after the admin page was opened.
FILES_MAX_AGE_SECONDS = 3600
# What the served files may do: scripts and forms, in an origin of their own.
SANDBOX = "sandbox allow-scripts allow-forms allow-popups"


def declared(plugin: dict) -> list[dict]:
    """`[{id, label, path}]` of a plugin the runtime lists (`list_plugins`): each `Page`
    component, its HTML file's path in the plugin's folder."""
    pages = []
    for component in plugin.get("components") or []:
        listed = component.get("manifest") or {}
        manifest = listed.get("manifest") or {}
        if manifest.get("kind") != PAGE_KIND:
            continue
        metadata = manifest.get("metadata") or {}
        html = str((manifest.get("spec") or {}).get("path") or "index.html")
        folder = posixpath.dirname(str(listed.get("rel_path") or "").replace("\\", "/"))
        pages.append({"id": metadata.get("name") or "", "label": metadata.get("label") or {},
                      "path": posixpath.normpath(posixpath.join(folder, html))})
    return pages


def find(installation: PluginInstallation, page_id: str) -> dict | None:
    return next((page for page in installation.pages or [] if page["id"] == page_id), None)


def files_token(installation: PluginInstallation, page_id: str, user_id: int) -> str:
    return signing.dumps({"plugin": installation.plugin_id, "page": page_id, "user": user_id},
                         salt=SALT)


def read_files_token(token: str) -> dict | None:
    """What a frame's signed path grants (`{plugin, page, user}`); None when it is forged or
    expired."""
    try:
        return signing.loads(token, salt=SALT, max_age=FILES_MAX_AGE_SECONDS)
    except signing.BadSignature:
        return None


def file_path(page: dict, relative: str) -> str | None:
    """A file the page refers to (relative to its HTML), in the plugin's folder; None when it
    would leave the page's folder."""
    folder = posixpath.dirname(page["path"])
    path = posixpath.normpath(posixpath.join(folder, relative or posixpath.basename(page["path"])))
    if posixpath.isabs(path) or path.startswith("..") or (
            folder and not path.startswith(f"{folder}/")):
        return None
    return path
