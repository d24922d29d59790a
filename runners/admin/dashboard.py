"""What the admin index shows: the runtime link, runners, and the ledger's runs and model
calls."""

from asgiref.sync import async_to_sync

from ledger.selectors.dashboard import STATUS_ORDER, model_call_days, run_summary
from runners.models import RunnerDescriptor
from runners.plugins.gateway import get_gateway

# Status colours of the chart and the badges (also in static/langhost/css/langhost.css).
STATUS_COLORS = {
    "queued": "#8a9ba8",
    "running": "#417690",
    "completed": "#2e7d32",
    "failed": "#ba2121",
    "cancelled": "#6f6f6f",
    "timeout": "#d9822b",
}
CHART_WIDTH, CHART_HEIGHT, CHART_AXIS = 480, 120, 18


def runner_counts() -> dict:
    rows = RunnerDescriptor.objects.values_list("source", "available")
    counts = {"available": 0, "total": 0, "plugin_available": 0, "builtin_available": 0}
    for source, available in rows:
        counts["total"] += 1
        if available:
            counts["available"] += 1
            counts[f"{source}_available"] = counts.get(f"{source}_available", 0) + 1
    return counts


async def _runtime_status() -> dict:
    return await get_gateway().status()


def runtime_summary() -> dict:
    """The runtime link's mode, state and last error (does not start the runtime)."""
    try:
        status = async_to_sync(_runtime_status)()
    except Exception as exc:  # a broken link must not take the admin index down
        return {"mode": "unknown", "state": "unknown", "state_reason": str(exc), "ok": False}
    return {**status, "ok": status.get("state") == "ready"}


def chart(hourly: list[dict], width: int = CHART_WIDTH, height: int = CHART_HEIGHT) -> dict:
    """Stacked bars (one per hour, one segment per status) for a server-rendered SVG."""
    peak = max([bucket["total"] for bucket in hourly] + [1])
    slot = width / max(len(hourly), 1)
    bar_width = max(slot - 2, 1)
    bars = []
    for index, bucket in enumerate(hourly):
        x = round(index * slot + 1, 2)
        y = float(height)
        segments = []
        for status in STATUS_ORDER:
            count = bucket["counts"].get(status, 0)
            if not count:
                continue
            h = count / peak * height
            y -= h
            segments.append({"status": status, "count": count, "x": x, "y": round(y, 2),
                             "width": round(bar_width, 2), "height": round(h, 2),
                             "color": STATUS_COLORS[status]})
        bars.append({"start": bucket["start"], "total": bucket["total"], "segments": segments,
                     "x": x, "width": round(bar_width, 2)})
    labels = [{"x": round(i * slot + 1, 2), "text": hourly[i]["start"].strftime("%H:00")}
              for i in range(0, len(hourly), 6)]
    return {"width": width, "height": height, "full_height": height + CHART_AXIS, "peak": peak,
            "bars": bars, "labels": labels, "axis_y": height + 13}


def dashboard_context(now=None) -> dict:
    summary = run_summary(now)
    legend = [{"status": status, "count": summary["by_status"][status],
               "color": STATUS_COLORS[status]} for status in STATUS_ORDER]
    return {"runs": summary, "runners": runner_counts(), "runtime": runtime_summary(),
            "chart": chart(summary["hourly"]), "legend": legend,
            "model_calls": model_call_days(summary["now"])}
