"""Evaluations in the admin: the kept reports (every case and criterion), and a page on an
agent that runs an eval set against it in the background (`manage.py eval_agent` does the same
at the command line)."""

import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from runners.conversations.callers import Caller
from runners.evals import evalset, services
from runners.evals.models import EvalReport
from runners.models import AgentInstance
from runners.runtime.host_process import host_process
from runners.runtime.loop_bound import submit


class EvaluateForm(forms.Form):
    evalset = forms.FileField(label="Eval set", help_text=(
        "A YAML file: `name`, `cases` of `turns` (`user`, and what to `expect`: `reply_exact` "
        "or `reply_contains`, `tool_calls` in order, a `rubric` for the judge model)."))
    judge = forms.CharField(required=False, label="Judge model", help_text=(
        "The model that grades rubrics, if the eval set names none."))

    def clean_evalset(self):
        try:
            return evalset.parse(self.cleaned_data["evalset"].read().decode("utf-8"))
        except (evalset.EvalSetError, UnicodeDecodeError) as exc:
            raise forms.ValidationError(str(exc)) from None


@admin.register(EvalReport)
class EvalReportAdmin(admin.ModelAdmin):
    list_display = ["evalset_name", "agent", "passed", "failed", "created_at"]
    list_filter = ["agent", "evalset_name"]
    readonly_fields = ["agent", "evalset_name", "passed", "failed", "created_at", "cases",
                       "report"]
    exclude = ["report_json"]

    def has_add_permission(self, request):
        return False  # made by running an eval set (the agent's page, or `eval_agent`)

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="cases and criteria")
    def cases(self, report):
        rows = [(case["name"], criterion["name"],
                 "PASS" if criterion["passed"] else "FAIL", criterion["detail"])
                for case in report.report_json.get("cases", []) for turn in case["turns"]
                for criterion in turn["criteria"]]
        return format_html(
            '<table id="eval-criteria"><thead><tr><th>case</th><th>criterion</th><th>result</th>'
            "<th>detail</th></tr></thead><tbody>{}</tbody></table>",
            format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", rows))

    @admin.display(description="report (JSON)")
    def report(self, report):
        return format_html("<pre>{}</pre>", json.dumps(report.report_json, indent=2,
                                                        ensure_ascii=False))

    def get_urls(self):
        return [path("evaluate/<uuid:agent_id>/", self.admin_site.admin_view(self.evaluate_view),
                     name="evals_evalreport_evaluate"), *super().get_urls()]

    def evaluate_view(self, request, agent_id):
        """Run an uploaded eval set against the agent, in the background of this process."""
        if not request.user.is_superuser:
            raise PermissionDenied
        agent = get_object_or_404(AgentInstance.objects.select_related("agent_type", "project"),
                                  pk=agent_id)
        form = EvaluateForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            submit(services.evaluate(agent, form.cleaned_data["evalset"],
                                     form.cleaned_data["judge"] or None, Caller(request.user)),
                   host_process().loop)
            messages.success(request, f"Evaluating {agent.name} with "
                                      f"“{form.cleaned_data['evalset'].name}”: its report shows "
                                      "here when every case has run.")
            return redirect(reverse("admin:evals_evalreport_changelist")
                            + f"?agent__id__exact={agent.pk}")
        return TemplateResponse(request, "admin/evals/evaluate.html", {
            **self.admin_site.each_context(request), "title": f"Evaluate {agent.name}",
            "opts": self.model._meta, "form": form, "agent": agent})
