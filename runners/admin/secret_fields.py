"""Admin form fields for secrets that are written, never shown (MCP servers' env and
headers, providers' extra headers)."""

from django import forms

from runners.catalogue import runner_config


class WriteOnlyTextarea(forms.Textarea):
    """Never renders a value: not the stored secrets (it has none), nor ones just typed into
    a form that failed validation."""

    def format_value(self, value):
        return None


def secrets_field(label: str, example: str) -> forms.CharField:
    return forms.CharField(
        label=label, required=False, strip=True,
        widget=WriteOnlyTextarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text=f"One per line, {example}. Stored encrypted, never shown again. Filled in, "
                  "it replaces all of them; left blank, it keeps them.")


def parse_secrets(text: str, separator: str, pattern, what: str) -> dict[str, str]:
    values = {}
    for line in filter(None, (line.strip() for line in text.splitlines())):
        name, found, value = line.partition(separator)
        name = name.strip()
        if not found or not pattern.match(name):
            # A name, never a line: without its separator the line may be a bare secret.
            shown = f" (not {name!r})" if found and name else ""
            raise forms.ValidationError(f"Write each {what} as NAME{separator}value{shown}.")
        values[name] = value.strip()
    return values


def show_config_without_secrets(form: forms.ModelForm, field: str, stored: dict) -> None:
    """`form`'s JSON config `field` shown without the secrets `stored` holds (sealed ones),
    its help naming them: they are kept unless given again, null clears one."""
    form.initial[field] = runner_config.shown(stored)
    if secrets := runner_config.secrets_set(stored):
        form.fields[field].help_text = (
            f"Secrets set (not shown; kept unless given again, null clears): "
            f"{', '.join(secrets)}.")
